"""Refusals as types; each message names the rule and the values involved.

`exit_code` follows the command contract: 1 for a saved failure or a
refusal, 2 for bad usage or an unknown object.
"""

import re


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


# What a reason may not hold: control characters (NUL, escape sequences; line breaks and tabs
# excepted) and the invisible and direction-changing format characters (zero-width, bidi
# embeddings, overrides and isolates, the byte-order mark). One character class, so the API's
# OpenAPI document declares exactly this rule (`REASON_PATTERN`). Lone surrogates are refused too
# (`has_control`); a pattern cannot name them, and the API refuses them in any body first.
_REFUSED = (
    "\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f\\u200b-\\u200f\\u2028\\u2029"
    "\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u2069\\ufeff"
)
# Free text of a decision: no refused character, and at least one that is not white space.
REASON_PATTERN = f"^[^{_REFUSED}]*[^{_REFUSED}\\s][^{_REFUSED}]*$"
OPTIONAL_REASON_PATTERN = f"^[^{_REFUSED}]*$"
_CONTROL = re.compile(f"[{_REFUSED}\\ud800-\\udfff]")


def has_control(text: str) -> bool:
    """A character a reason may not hold (`_REFUSED`, or a lone surrogate)."""
    return _CONTROL.search(text) is not None


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
    if has_control(reason):
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
