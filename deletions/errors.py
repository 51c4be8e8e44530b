"""Refusals as types; each message names the rule and the values involved.

`exit_code` follows SPEC 3.4: 1 for a saved failure or refusal, 2 for bad
usage or an unknown request.
"""


class DeletionError(Exception):
    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadInput(DeletionError):
    """Malformed input, refused before any row is written."""

    exit_code = 2


class UnknownRequest(DeletionError):
    exit_code = 2


class Refused(DeletionError):
    """The request's saved state does not allow this."""


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
