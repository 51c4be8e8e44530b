"""The protocol every target system's adapter speaks, and what it answers. Pure values.

- `inventory(target, communities)`: the person's communities and roles, read from the target;
- `preview(target, community_ids)`: per community its name, rows, agents and data version, read now;
- `fence(request_id)`: the highest lease generation the target has seen for a request;
- `apply(grant)`: the effect a signed grant authorizes, applied once in the target's own transaction;
  the evidence read in that transaction, `TargetRefused` (nothing applied), or `TargetBusy` (nothing
  changed, retry: the receiver's transaction rolled back on a lock or statement timeout, or the same
  operation is still running there);
- `lookup(operation_id)`: `Found` with the evidence, `NotFound` as of a watermark, or `Unreadable`;
- `withdraw(withdrawal)`: a signed withdrawal raises the request's minimum authority epoch at the
  target (a grant of an older epoch is refused from then on); the epoch the target now enforces.

`capabilities` says what the receiver itself enforces; a receiver that cannot fence stale owners
or check the expected version cannot be trusted to refuse a stale or changed effect, so it is
`supervised`: each effect is handed to an operator, who records what they did.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from core.errors import Refused


@dataclass(frozen=True)
class Capabilities:
    fences_stale_owners: bool
    checks_expected_version: bool
    idempotent_per_operation: bool
    lookups_can_lag: bool


def supervised(c: Capabilities) -> bool:
    """Effects at this receiver wait for a person: it could not refuse a stale or changed one."""
    return not (c.fences_stale_owners and c.checks_expected_version)


@dataclass(frozen=True)
class Found:
    evidence: dict[str, Any]


@dataclass(frozen=True)
class NotFound:
    watermark: datetime  # the target had seen every operation applied up to here
    state: Any = None  # what a receiver's database has applied (`http.State`), when it says


@dataclass(frozen=True)
class Unreadable:
    reason: str


Lookup = Found | NotFound | Unreadable


def inconclusive(answer: NotFound | Unreadable, *, submitted_at: datetime, where: str) -> str | None:
    """Why a lookup that found nothing proves nothing yet, or None when it proves the operation was not
    applied: only a "not found" whose watermark is past the submission is evidence."""
    if isinstance(answer, Unreadable):
        return f"{where} could not be read ({answer.reason})"
    if answer.watermark > submitted_at:
        return None
    return (
        f"{where} has seen operations only up to {answer.watermark:%Y-%m-%d %H:%M:%S} UTC, before the submission "
        f"at {submitted_at:%Y-%m-%d %H:%M:%S} UTC"
    )


CALL_REFUSED = "call_refused"  # a receiver checked the call itself and refused it whole: nothing applied


class TargetRefused(Exception):
    """The target applied nothing: `kind` (stale, expired, revoked, tampered, not_in_inventory,
    source_changed, rules_changed, record_mismatch, constraint, incomplete, `CALL_REFUSED`) and its
    sentence."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class TargetBusy(Exception):
    """Nothing changed at the target, retry: its transaction rolled back (`kind`: lock_timeout,
    statement_timeout, serialization) or the same operation is still running there (`running`).
    A plain failed attempt, retried with the normal backoff: no effect is in question."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class TargetUnreachable(Refused):
    """The target system could not be reached or did not answer (a lost connection, a timeout, a
    stopped server): whether anything was applied is for a lookup to say."""


class Adapter(Protocol):
    name: str

    @property
    def capabilities(self) -> Capabilities: ...

    def inventory(self, target: str, communities: int) -> list[dict[str, str]]: ...

    def preview(self, target: str, community_ids: list[str]) -> dict[str, dict[str, Any]]: ...

    def fence(self, request_id: UUID) -> int: ...

    def apply(self, grant: str) -> dict[str, Any]: ...

    def lookup(self, operation_id: UUID) -> Lookup: ...

    def withdraw(self, withdrawal: str) -> int: ...

    def believed_state(self, evidence: dict[str, Any]) -> tuple[str, str, int] | None:
        """The receiver state believed evidence carries, to be noted with it: (the registration's prefix,
        the receiver's incarnation, its applied count); None for a system that keeps none."""
        ...

    def where(self) -> str: ...
