"""What the receiver says of an effect, whatever the application: the grant checked (signature, kind,
not-after, every field it takes), the refusals in words, what a database error means (`Busy`, `Broken`),
a withdrawal read, and whether a record under an operation id is one a grant of the back-office made.

Everything else (the fence, the epoch, the replay of an operation already applied, the data version, the
change itself) is one statement in the application's own database, generated from its dataset file
(`receiver.dataset.compile`); `apply` runs it in its own transaction (or the HTTP call's) and reads its
refusal (SQLSTATE TR001, the kind in its message, the facts as JSON in its detail) into a sentence.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from django.db import DatabaseError, connections, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from receiver import ALIAS, signing
from wire import grants

REFUSAL = "TR001"  # the SQLSTATE of a refusal by the generated apply


class Refused(Exception):
    """The receiver applied nothing; `kind` says why in one word, the message in a sentence."""

    kind = "refused"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Tampered(Refused):
    kind = "tampered"


class Expired(Refused):
    kind = "expired"


class Stale(Refused):
    kind = "stale"


class NotMember(Refused):
    kind = "not_in_inventory"


class Revoked(Refused):
    kind = "revoked"


class SourceChanged(Refused):
    kind = "source_changed"


class Mismatch(Refused):
    kind = "record_mismatch"


class RulesChanged(Refused):
    kind = "rules_changed"


class Incomplete(Refused):
    kind = "incomplete"


class Broken(Refused):
    """The application's database refused the effect itself (a constraint, a value its column cannot
    hold): nothing was applied, and sending it again changes nothing; a person decides."""

    kind = "constraint"

    def __init__(self, message: str, *, table: str | None = None, constraint: str | None = None) -> None:
        super().__init__(message)
        self.table = table
        self.constraint = constraint


class Unreadable(Exception):
    """The receiver's records cannot be read now: nothing can be concluded."""


@dataclass(frozen=True)
class Found:
    evidence: dict[str, Any]


@dataclass(frozen=True)
class NotFound:
    watermark: datetime  # every operation applied up to here would have been seen


class Busy(Exception):
    """Nothing changed: the transaction rolled back on a lock or statement timeout (or a conflict
    PostgreSQL broke); the same operation may be sent again."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


BUSY = {"55P03": "lock_timeout", "57014": "statement_timeout", "40001": "serialization", "40P01": "deadlock"}


def classified(cause: psycopg.Error) -> Exception | None:
    """What a database error inside an effect means for its caller: Busy (rolled back, retry), Broken
    (a constraint or data error: refused), or None (the database itself failed: nothing can be said)."""
    state = cause.sqlstate or ""
    first = (cause.diag.message_primary or str(cause)).strip().splitlines()[0] if str(cause).strip() else state
    if state in BUSY:
        return Busy(BUSY[state], f"{first} ({BUSY[state].replace('_', ' ')}); the transaction rolled back")
    if state[:2] in ("22", "23"):
        return Broken(first, table=cause.diag.table_name, constraint=cause.diag.constraint_name)
    return None


def withdrawal(token: str) -> tuple[UUID, int]:
    """The request and epoch a withdrawal signed by the back-office names, its fields checked; else
    Tampered, naming what is wrong."""
    try:
        w = grants.verify(token, signing.backoffice_key())
    except grants.BadGrant as exc:
        raise Tampered(f"withdrawal refused: {exc}") from None
    if w.get("kind") != "withdrawal":
        raise Tampered("withdrawal refused: a grant is not a withdrawal")
    epoch = w.get("epoch")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
        raise Tampered("withdrawal refused: its field 'epoch' is missing or not a non-negative integer")
    try:
        return UUID(str(w.get("request_id"))), epoch
    except ValueError:
        raise Tampered("withdrawal refused: its field 'request_id' is not a UUID") from None


Effect = Callable[[Any, dict[str, Any]], tuple[Any, ...]]


def _fields(g: dict[str, Any]) -> dict[str, Any]:
    """The grant's fields an effect takes, checked: a signed grant missing one or of the wrong shape is
    refused naming the field, never half-read."""

    def field(name: str, kind: type | tuple[type, ...], *, optional: bool = False) -> Any:
        v = g.get(name)
        if (v is None and optional) or (isinstance(v, kind) and not isinstance(v, bool)):
            return v
        raise Tampered(f"grant refused: its field {name!r} is missing or not a {getattr(kind, '__name__', kind)}")

    for name in ("operation_id", "request_id"):
        try:
            UUID(field(name, str))
        except ValueError:
            raise Tampered(f"grant refused: its field {name!r} is not a UUID") from None
    versions = field("expected_versions", dict, optional=True)
    if versions is not None and not all(isinstance(v, int) and not isinstance(v, bool) for v in versions.values()):
        raise Tampered("grant refused: its field 'expected_versions' maps communities to integers")
    return {
        "operation_id": g["operation_id"],
        "request_id": g["request_id"],
        "generation": field("generation", int),
        "epoch": field("epoch", int, optional=True) or 0,
        "action": field("action", str),
        "community_id": field("community_id", str, optional=True),
        "handle": field("target", str),
        "expected_version": field("expected_version", int, optional=True),
        "expected_versions": None if versions is None else json.dumps(versions),
        "executor": field("executor", str),
    }


def apply(token: str, effect: Effect) -> dict[str, Any]:
    """Apply the effect a grant authorizes, once, in its own transaction or in the caller's (the HTTP
    call's, which took its nonce first: no savepoint, so a refusal or a database error rolls that back
    whole): its evidence, or Refused, with nothing applied, or Busy (rolled back: send it again). `effect` runs
    the application's one statement (and what must hold before it commits) on a cursor, with the
    grant's checked fields."""
    now = timezone.now()
    try:
        g = grants.verify(token, signing.backoffice_key())
    except grants.BadGrant as exc:
        raise Tampered(f"grant refused: {exc}") from None
    if g.get("kind", "grant") != "grant":
        raise Tampered("grant refused: a withdrawal is not a grant")
    not_after = parse_datetime(str(g.get("not_after", "")))
    if not_after is None or not_after <= now:
        raise Expired(f"grant for operation {g.get('operation_id')} expired at {g.get('not_after')}")
    params = {**_fields(g), "grant": token, "now": now, "applied_at": now.isoformat()}
    try:
        with transaction.atomic(using=ALIAS, savepoint=False), connections[ALIAS].cursor() as cur:
            recorded, evidence, made_under, applied_at = effect(cur, params)
    except DatabaseError as exc:
        cause = exc.__cause__
        if not isinstance(cause, psycopg.Error):
            raise
        if cause.sqlstate == REFUSAL:
            raise _refusal(cause.diag.message_primary, json.loads(cause.diag.message_detail or "{}"), g) from None
        meaning = classified(cause)
        if meaning is None:
            raise
        raise meaning from None
    if recorded:  # applied before under this operation id: its first record, if a grant of ours made it
        check_matches(made_under, g["operation_id"], applied_at, g)
    return json.loads(evidence) if isinstance(evidence, str) else dict(evidence)  # (Django reads jsonb as text)


def _refusal(kind: str | None, facts: dict[str, Any], g: dict[str, Any]) -> Refused:
    """What the generated apply refused, in a sentence: nothing was applied."""
    request_id = g["request_id"]
    if kind == "stale":
        return Stale(
            f"generation {g['generation']} of {g['executor']} is fenced out: generation {facts['fenced']} owns "
            f"request {request_id}"
        )
    if kind == "revoked":
        raised_at = parse_datetime(facts["raised_at"]) if facts.get("raised_at") else None
        acknowledged = f"{raised_at:%Y-%m-%d %H:%M:%S} UTC" if raised_at else "at an unknown time"
        return Revoked(
            f"authority over request {request_id} was withdrawn (epoch {facts['min_epoch']}, acknowledged "
            f"{acknowledged}): a grant of epoch {g.get('epoch', 0)} is refused"
        )
    if kind == "not_a_person":
        return NotMember(f"{g['target']} is not a person of this system")
    if kind == "not_in_inventory" and "community" in facts:  # at the gate: a community the approval saw
        return NotMember(f"{g['target']} has no data version in community {facts['community']}; nothing was applied")
    if kind == "not_in_inventory":
        return NotMember(f"{g['target']} has no membership in community {g['community_id']}; nothing was applied")
    if kind == "rules_changed":
        return RulesChanged(
            f"the deletion rules changed: v{facts.get('from')} → v{facts.get('to')} since the approval saw "
            f"{g['target']}'s data; nothing was applied (the case is reviewed again, with a new preview)"
        )
    if kind == "source_changed" and "unseen" in facts:
        return SourceChanged(
            f"source changed: {g['target']} now has rows in community {facts['unseen']}, which the approval did "
            "not see; nothing was applied"
        )
    if kind == "source_changed" and "community" in facts:
        return SourceChanged(
            f"source changed: {g['target']}'s data in community {facts['community']} is at version "
            f"{facts['version']}, the approval saw version {facts['expected']}; nothing was applied"
        )
    if kind == "source_changed":
        return SourceChanged(
            f"source changed: {g['target']}'s data in community {g['community_id']} is at version "
            f"{facts['version']}, the approval saw version {g['expected_version']}; nothing was applied"
        )
    return Refused(f"this system has no action {g['action']!r}")


def made_by(grant: str) -> dict[str, Any]:
    """The grant a record was applied under, when the back-office signed it (else nothing)."""
    try:
        return grants.verify(grant, signing.backoffice_key())
    except grants.BadGrant:
        return {}


def check_matches(grant: str, operation_id: Any, applied_at: datetime, g: dict[str, Any]) -> None:
    """A record under this operation id counts only if a grant of ours made it for this effect."""
    made = made_by(grant)
    if any(made.get(k) != g.get(k) for k in ("operation_id", "request_id", "action", "community_id")):
        raise Mismatch(
            f"a record under operation {operation_id} (applied {applied_at:%Y-%m-%d %H:%M:%S} UTC) was "
            "not made by a grant of the back-office for this effect; refused, not adopted"
        )
