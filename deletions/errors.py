"""Deletion refusals; the base types live in core.errors."""

from core.errors import BadInput, DomainError, NotFound, Refused

DeletionError = DomainError
__all__ = [
    "BadInput",
    "DeletionError",
    "Interrupted",
    "LeaseHeld",
    "Refused",
    "RetryNotDue",
    "StaleLease",
    "UnknownRequest",
    "WorkflowError",
]


class UnknownRequest(NotFound):
    pass


class LeaseHeld(Refused):
    pass


class RetryNotDue(Refused):
    pass


class StaleLease(Refused):
    """A write carried an owner or generation that is no longer current."""


class WorkflowError(Refused):
    """Saved history cannot be reconstructed; nothing is invented."""


class Interrupted(Refused):
    """The run was stopped by a signal; the lease was released."""
