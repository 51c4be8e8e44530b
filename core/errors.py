"""Refusals as types; each message names the rule and the values involved.

`exit_code` follows the command contract: 1 for a saved failure or a
refusal, 2 for bad usage or an unknown object.
"""

import unicodedata


class DomainError(Exception):
    exit_code = 1

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field  # the input it concerns, where one does (the API names it)


class BadInput(DomainError):
    """Malformed input, refused before any row is written."""

    exit_code = 2


MAX_REASON_CHARS = 2000  # the admin's reason fields hold as much
SHOWN_CHARS = 100


def shown(value: object) -> str:
    """A value as a refusal quotes it: its repr (control characters escaped), cut to 100 characters."""
    text = repr(value)
    if len(text) <= SHOWN_CHARS:
        return text
    size = f" ({len(value)} characters)" if isinstance(value, str) else ""
    return text[:SHOWN_CHARS] + "…" + size


def has_control(text: str, *, newlines: bool = False) -> bool:
    """Control and format characters (NUL, escape sequences, bidi overrides); optionally
    allowing line breaks and tabs, which a reason may hold."""
    return any(unicodedata.category(c)[0] == "C" and not (newlines and c in "\n\r\t") for c in text)


def plain_text(value: str | None, what: str, *, max_chars: int) -> str:
    """A one-line name or id: 1 to `max_chars` printable characters, stripped."""
    text = (value or "").strip()
    if not text or len(text) > max_chars or not text.isprintable():
        raise BadInput(f"{what} {shown(value)} is refused: give 1-{max_chars} printable characters")
    return text


def optional_reason(reason: str | None) -> str:
    """A staff decision's reason, stripped; refused (before any write) when longer than the
    admin allows or holding control characters (line breaks are fine)."""
    reason = (reason or "").strip()
    if len(reason) > MAX_REASON_CHARS:
        raise BadInput(f"the reason is refused: at most {MAX_REASON_CHARS} characters (got {len(reason)})")
    if has_control(reason, newlines=True):
        raise BadInput(f"the reason {shown(reason)} is refused: it holds control characters")
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


class NotAllowed(Refused):
    """The actor's permissions do not allow this (whatever the saved state)."""
