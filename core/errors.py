"""Refusals as types; each message names the rule and the values involved.

`exit_code` follows the command contract: 1 for a saved failure or a
refusal, 2 for bad usage or an unknown object.
"""


class DomainError(Exception):
    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadInput(DomainError):
    """Malformed input, refused before any row is written."""

    exit_code = 2


def required_reason(reason: str | None, what: str) -> str:
    """A staff decision's reason, stripped; refused (before any write) when empty."""
    reason = (reason or "").strip()
    if not reason:
        raise BadInput(f"a reason is required to {what}")
    return reason


class NotFound(DomainError):
    exit_code = 2


class Refused(DomainError):
    """The saved state (or the actor's permissions) does not allow this."""
