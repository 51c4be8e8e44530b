"""The demo target system: a separate database holding people's data, and the only place a
deletion effect lands.

Everything here runs in the target's own database (alias `target`) and trusts nothing the
back-office says unless a grant signed by it says so: `apply` checks the grant's signature and
not-after, then, in the one statement that deletes (the function `target_apply`, its own
transaction), the fence (the highest lease generation seen per request), the authority epoch, the
person's membership in the community, the data version the approval saw, and whether the
operation was already applied (its first outcome is returned, or a record that does not match the
grant is refused). Its record carries evidence read in that transaction.
`withdraw` raises the lowest authority epoch a grant must carry (a revocation or a cancellation
pushed by the back-office). `lookup` answers as of a watermark: what it has seen so far, never a guess.

A `demo:` person is created the first time anything asks about them: a participant of B, a
former participant of C (and of more communities when asked), each with rows and agents.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.db.models import Count
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from demo_target.models import Agent, Community, Fence, Membership, Operation, Person, Post
from demo_target.router import ALIAS
from receiver.signing import backoffice_key
from wire import grants
from wire.sql import Statements

SQL = Statements.beside(__file__, "system.sql")
REFUSAL = "TR001"  # the SQLSTATE of a refusal by target_apply (migration 0003)
COMMUNITY_B = UUID("00000000-0000-0000-0000-00000000000b")
COMMUNITY_C = UUID("00000000-0000-0000-0000-00000000000c")
NAMES = {COMMUNITY_B: "Community B (demo)", COMMUNITY_C: "Community C (demo)"}


class Refused(Exception):
    """The target applied nothing; `kind` says why in one word, the message in a sentence."""

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


class Unreadable(Exception):
    """The target's records cannot be read now: nothing can be concluded."""


@dataclass(frozen=True)
class Found:
    evidence: dict[str, Any]


@dataclass(frozen=True)
class NotFound:
    watermark: datetime  # every operation applied up to here would have been seen


def community_ids(count: int) -> list[UUID]:
    """B and C, then (for large requests) artificial communities with fixed ids."""
    return [COMMUNITY_B, COMMUNITY_C, *(UUID(int=(1 << 64) + i) for i in range(1, count - 1))]


def _seeded(handle: str, community: UUID) -> tuple[int, int]:
    d = hashlib.sha256(f"{handle}|{community}".encode()).digest()
    return 3 + d[0] % 40, 1 + d[1] % 2  # rows, agents


def enroll(handle: str, communities: int = 2) -> Person:
    """The person, created with B (participant), C (former participant) and up to `communities`
    memberships in all, each with its rows and agents; an existing person gains only what is missing."""
    longest = Person._meta.get_field("handle").max_length or 0
    if len(handle) > longest:  # (refused before anything is written)
        raise Refused(f"the demo target keeps handles of at most {longest} characters; this one has {len(handle)}")
    now = timezone.now()
    with transaction.atomic(using=ALIAS):
        person, _ = Person.objects.get_or_create(handle=handle, defaults={"created_at": now})
        have = set(Membership.objects.filter(person=person).values_list("community_id", flat=True))
        for position, cid in enumerate(community_ids(communities)):
            if cid in have:
                continue
            community, _ = Community.objects.get_or_create(
                id=cid, defaults={"name": NAMES.get(cid, f"Community …{str(cid)[-4:]} (demo)")}
            )
            role = "participant" if position == 0 or (position > 1 and (position - 1) % 2) else "former_participant"
            m = Membership.objects.create(person=person, community=community, role=role)
            rows, agents = _seeded(handle, cid)
            Post.objects.bulk_create(
                Post(membership=m, body=f"post {i} by {handle}", created_at=now) for i in range(rows)
            )
            Agent.objects.bulk_create(Agent(membership=m, name=f"agent {i}") for i in range(agents))
        return person


def memberships(handle: str, communities: int = 2) -> list[dict[str, str]]:
    """The person's communities (id, role) in community order: what an inventory lists."""
    person = enroll(handle, communities)
    return [
        {"id": str(cid), "role": role}
        for cid, role in Membership.objects.filter(person=person)
        .order_by("community_id")
        .values_list("community_id", "role")
    ]


def _communities(handle: str, community_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Per community of the person (or of those given): id, name, membership, rows, agents and data version."""
    rows = Membership.objects.filter(person__handle=handle)
    if community_ids is not None:
        rows = rows.filter(community_id__in=community_ids)
    return [
        {
            "id": str(r["community_id"]),
            "name": r["community__name"],
            "membership": r["role"],
            "rows": r["n_rows"],
            "agents": r["n_agents"],
            "version": r["version"],
        }
        for r in rows.order_by("community_id")
        .annotate(n_rows=Count("posts", distinct=True), n_agents=Count("agents", distinct=True))
        .values("community_id", "community__name", "role", "n_rows", "n_agents", "version")
    ]


def preview(handle: str, community_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Per community: its name, the person's rows and agents there and the data version, read now."""
    return {c["id"]: c for c in _communities(handle, community_ids)}


def fence(request_id: UUID) -> int:
    """The highest lease generation this target has seen for a request (0: none). Read before every
    run, in SQL (the ORM's compile was most of its cost)."""
    with connections[ALIAS].cursor() as cur:
        cur.execute("SELECT generation FROM target_fences WHERE request_id = %s", [request_id])
        row = cur.fetchone()
    return int(row[0]) if row else 0


def withdrawal(token: str) -> tuple[UUID, int]:
    """The request and epoch a withdrawal signed by the back-office names, its fields checked; else
    Tampered, naming what is wrong."""
    try:
        w = grants.verify(token, backoffice_key())
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


def withdraw(token: str) -> int:
    """Raise a request's minimum authority epoch, as a withdrawal signed by the back-office says;
    from this commit on, a grant of an older epoch is refused. The epoch now in force (an older
    withdrawal arriving late lowers nothing)."""
    request_id, epoch = withdrawal(token)
    with transaction.atomic(using=ALIAS):
        f, _ = Fence.objects.select_for_update().get_or_create(request_id=request_id, defaults={"generation": 0})
        if epoch > f.min_epoch:
            f.min_epoch, f.epoch_raised_at = epoch, timezone.now()
            f.save(update_fields=["min_epoch", "epoch_raised_at"])
        return f.min_epoch


class RulesChanged(Refused):
    kind = "rules_changed"


class Broken(Refused):
    """The target's database refused the effect itself (a constraint, a value its column cannot hold):
    nothing was applied, and sending it again changes nothing; a person decides."""

    kind = "constraint"

    def __init__(self, message: str, *, table: str | None = None, constraint: str | None = None) -> None:
        super().__init__(message)
        self.table = table
        self.constraint = constraint


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


def apply(token: str, *, sql: Statements = SQL, effect: Effect | None = None, atomic: bool = False) -> dict[str, Any]:
    """Apply the effect a grant authorizes, once, in one statement (its own transaction, or a
    savepoint in a caller's): its evidence, or Refused, with nothing applied, or Busy (rolled back:
    send it again). `sql`'s statement `apply` is the one call (here `target_apply`); a dataset
    receiver passes its own `effect` (the statement and what must hold before it commits) and asks
    for a transaction of its own (`atomic`)."""
    now = timezone.now()
    try:
        g = grants.verify(token, backoffice_key())
    except grants.BadGrant as exc:
        raise Tampered(f"grant refused: {exc}") from None
    if g.get("kind", "grant") != "grant":
        raise Tampered("grant refused: a withdrawal is not a grant")
    not_after = parse_datetime(str(g.get("not_after", "")))
    if not_after is None or not_after <= now:
        raise Expired(f"grant for operation {g.get('operation_id')} expired at {g.get('not_after')}")
    params = {**_fields(g), "grant": token, "now": now, "applied_at": now.isoformat()}
    target = connections[ALIAS]
    run = effect or (lambda cur, p: _row(cur, sql, "apply", **p))
    try:
        with (
            transaction.atomic(using=ALIAS) if atomic or target.in_atomic_block else nullcontext(),
            target.cursor() as cur,
        ):
            recorded, evidence, made_under, applied_at = run(cur, params)
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
        _check_matches(made_under, g["operation_id"], applied_at, g)
    return json.loads(evidence) if isinstance(evidence, str) else dict(evidence)  # (Django reads jsonb as text)


def _refusal(kind: str | None, facts: dict[str, Any], g: dict[str, Any]) -> Refused:
    """What `target_apply` refused, in a sentence: nothing was applied."""
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
    if kind == "not_in_inventory" and "community" in facts:
        return NotMember(f"{g['target']} has no data version in community {facts['community']}; nothing was applied")
    if kind == "source_changed":
        return SourceChanged(
            f"source changed: {g['target']}'s data in community {g['community_id']} is at version "
            f"{facts['version']}, the approval saw version {g['expected_version']}; nothing was applied"
        )
    return Refused(f"this system has no action {g['action']!r}")


def _made_by(grant: str) -> dict[str, Any]:
    """The grant a record was applied under, when the back-office signed it (else nothing)."""
    try:
        return grants.verify(grant, backoffice_key())
    except grants.BadGrant:
        return {}


def _check_matches(grant: str, operation_id: Any, applied_at: datetime, g: dict[str, Any]) -> None:
    """A record under this operation id counts only if a grant of ours made it for this effect."""
    made_by = _made_by(grant)
    if any(made_by.get(k) != g.get(k) for k in ("operation_id", "request_id", "action", "community_id")):
        raise Mismatch(
            f"a record under operation {operation_id} (applied {applied_at:%Y-%m-%d %H:%M:%S} UTC) was "
            "not made by a grant of the back-office for this effect; refused, not adopted"
        )


def _row(cur: Any, sql: Statements, name: str, **params: Any) -> tuple[Any, ...]:
    row = sql.one(cur, name, **params)
    assert row is not None, name  # each of these statements returns one row
    return row


def lookup(operation_id: UUID) -> Found | NotFound:
    """What this system recorded for an operation, as of its watermark; Unreadable when it cannot say.

    Demo switches (off by default): `DEMO_TARGET_UNREADABLE_UNTIL` (an ISO time) makes every
    lookup unreadable until then, and `DEMO_TARGET_LOOKUP_LAG_SECONDS` makes the lookup source
    lag that far behind, reporting its watermark that far back (a streaming replica would
    report its last replayed commit).
    """
    now = timezone.now()
    until = parse_datetime(settings.DEMO_TARGET_UNREADABLE_UNTIL or "")
    if until is not None and now < until:
        raise Unreadable(f"the target system cannot be read until {until.isoformat()}")
    watermark = now - timedelta(seconds=settings.DEMO_TARGET_LOOKUP_LAG_SECONDS)
    done = Operation.objects.filter(operation_id=operation_id, applied_at__lte=watermark).first()
    if done is None:
        return NotFound(watermark)
    # The operation id names the request, the stage and the community: a grant of ours for it is
    # a grant for this effect.
    _check_matches(
        done.grant, done.operation_id, done.applied_at, {**_made_by(done.grant), "operation_id": str(operation_id)}
    )
    return Found(done.evidence)


def show(handle: str) -> dict[str, Any]:
    person = enroll(handle)
    return {"target": handle, "gated": person.gated_at is not None, "communities": _communities(handle)}


def add_rows(handle: str, community: UUID, rows: int, role: str = "participant") -> dict[str, Any]:
    """What an application does: the person writes `rows` more rows in a community (joining it
    when not yet a member); their data version there moves on."""
    now = timezone.now()
    with transaction.atomic(using=ALIAS):
        person = enroll(handle)
        c, _ = Community.objects.get_or_create(id=community, defaults={"name": f"Community …{str(community)[-4:]}"})
        m, _ = Membership.objects.select_for_update().get_or_create(person=person, community=c, defaults={"role": role})
        Post.objects.bulk_create(Post(membership=m, body=f"new post {i}", created_at=now) for i in range(rows))
        m.version += 1
        m.save(update_fields=["version"])
    return show(handle)


def set_agents(handle: str, community: UUID, agents: int) -> dict[str, Any]:
    """The person's agents in a community become `agents` (their data version moves on)."""
    with transaction.atomic(using=ALIAS):
        person = enroll(handle)
        m = Membership.objects.select_for_update().get(person=person, community_id=community)
        Agent.objects.filter(membership=m).delete()
        Agent.objects.bulk_create(Agent(membership=m, name=f"agent {i}") for i in range(agents))
        m.version += 1
        m.save(update_fields=["version"])
    return show(handle)
