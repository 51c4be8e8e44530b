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


MAX_REASON_CHARS = 2000  # the admin's reason fields hold as much


def optional_reason(reason: str | None) -> str:
    """A staff decision's reason, stripped; refused (before any write) when longer than the admin allows."""
    reason = (reason or "").strip()
    if len(reason) > MAX_REASON_CHARS:
        raise BadInput(f"the reason is refused: at most {MAX_REASON_CHARS} characters (got {len(reason)})")
    return reason


def required_reason(reason: str | None, what: str) -> str:
    """A staff decision's reason, stripped; refused (before any write) when empty or too long."""
    reason = optional_reason(reason)
    if not reason:
        raise BadInput(f"a reason is required to {what}")
    return reason


class NotFound(DomainError):
    exit_code = 2


class Refused(DomainError):
    """The saved state (or the actor's permissions) does not allow this."""
