"""The one clock for retirements (timezone-aware; moved with time-machine in tests)."""

from deletions.clock import now

__all__ = ["now"]
