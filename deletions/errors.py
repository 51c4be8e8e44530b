"""Deletion refusals; the base types live in core.errors."""

from datetime import datetime

from core.errors import BadInput, DomainError, NotFound, Refused

DeletionError = DomainError
__all__ = [
    "AlreadyOpen",
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


class AlreadyCompleted(Refused):
    """A run of a request that has completed: nothing to do, and nothing changed (no failure)."""


class ApprovalExpired(Refused):
    """An approved, unstarted request whose latest approval expired: not claimed (it goes back to review)."""

    def __init__(self, message: str, expires_at: datetime) -> None:
        super().__init__(message)
        self.expires_at = expires_at


class LeaseHeld(Refused):
    pass


class AlreadyOpen(Refused):
    """A submission refused because the person has an open request: its words name the case (for
    a caller who sees targets); `unnamed` says only that one exists (for one who may not: an answer
    naming it would confirm the person has a case, `core.access`)."""

    unnamed = "refused: this person already has an open deletion request; an operator can find it"


class RetryNotDue(Refused):
    pass


class StaleLease(Refused):
    """A write carried an owner or generation that is no longer current."""


class WorkflowError(Refused):
    """Saved history cannot be reconstructed; nothing is invented."""


class Interrupted(Refused):
    """The run was stopped by a signal; the lease was released."""
