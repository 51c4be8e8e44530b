"""Deletion refusals; the base types live in core.errors."""

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
