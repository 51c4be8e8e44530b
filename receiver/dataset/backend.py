"""The dataset receiver's backend: the six answers of the protocol, read and applied in an application's
own database through the objects `python -m receiver install` put in its schema `receiver`. The grant is
checked in Python (`receiver.effects`: signature, kind, not-after, its fields), everything else inside
`receiver.apply`.

Test machinery, refused in production (`receiver.settings`): `RECEIVER_TEST_UNREADABLE_UNTIL` (an ISO
time) makes every lookup unreadable until then, and `RECEIVER_TEST_LOOKUP_LAG_SECONDS` makes the lookup
lag that far behind, reporting its watermark that far back (as a streaming replica reports its last
replayed commit)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from functools import cache
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connections
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from receiver import ALIAS, effects
from receiver.dataset import catalog, compile, complete
from wire import bounds

SQL = complete.SQL


@cache
def dataset() -> dict[str, Any]:
    return compile.load(str(getattr(settings, "RECEIVER_DATASET", "")))


@cache
def compiled() -> compile.Compiled:
    """The file resolved against the application's catalog as it was when first asked (the rules the
    effects follow; the completeness walk reads the catalog again each time)."""
    with connections[ALIAS].cursor() as cur:
        return compile.check(dataset(), catalog.read(cur))


def rules() -> dict[str, Any]:
    """What the approval binds: this dataset, its version and its digest."""
    return {"dataset": dataset()["dataset"], "version": dataset()["version"], "digest": compile.digest(dataset())}


def name() -> str:
    return f"dataset {dataset()['dataset']} (version {dataset()['version']})"


def check_installed() -> None:
    """Refuse to serve no dataset file, or one other than the one installed (a changed file is installed
    again), one installed by an older receiver (its schema keeps no state: installed again), or one the
    application's tables have outgrown (a table added since that reaches the person, say)."""
    if not getattr(settings, "RECEIVER_DATASET", ""):
        raise compile.Refused("RECEIVER_DATASET names no dataset file: the receiver serves the one installed")
    with connections[ALIAS].cursor() as cur:
        row = SQL.one(cur, "installed", dataset=dataset()["dataset"])
        keeps = bool((SQL.one(cur, "keeps_state") or (False,))[0])
        schema = _state(cur)[1] if keeps else None
    if row is not None and (schema or 0) < compile.SCHEMA_VERSION:
        raise compile.Refused(
            f"dataset {dataset()['dataset']} was installed by an older receiver (schema version {schema or 1}, this "
            f"one is {compile.SCHEMA_VERSION}); run `python -m receiver install` with it again"
        )
    if row is None or row[1] != compile.digest(dataset()):
        raise compile.Refused(
            f"dataset {dataset()['dataset']}: this file is not what is installed in the database; run "
            "`python -m receiver install` with it first"
        )
    try:
        compiled()
    except compile.Refused as exc:
        raise compile.Refused(f"the application's tables no longer match the installed file: {exc}") from None


def _state(cur: Any) -> tuple[dict[str, Any], int | None]:
    """What this database has applied (`compile.STATE_SQL`: its incarnation and the number of its last
    operation newly applied), and the receiver schema's version."""
    incarnation, applied, schema = SQL.one(cur, "state") or (None, 0, None)
    return {"incarnation": str(incarnation), "applied": int(applied)}, schema


def state() -> dict[str, Any]:
    """What this database has applied, as a lookup's "not found" reports it."""
    with connections[ALIAS].cursor() as cur:
        return _state(cur)[0]


def health() -> dict[str, Any]:
    """The installed dataset (name, version, digest), the receiver schema's version, the state, and the
    receiver's bound on a call."""
    with connections[ALIAS].cursor() as cur:
        installed = SQL.one(cur, "installed", dataset=dataset()["dataset"])
        said, schema = _state(cur)
    version, digest = installed if installed else (None, None)
    return {
        "dataset": {"name": dataset()["dataset"], "version": version, "digest": digest},
        "schema_version": schema,
        "state": said,
        # Its bound on a call (`wire.bounds`): the back-office waits for an answer longer than this.
        "statement_timeout_ms": int(getattr(settings, "RECEIVER_STATEMENT_TIMEOUT_MS", bounds.STATEMENT_TIMEOUT_MS)),
    }


def _rows(handle: str) -> list[tuple[Any, ...]]:
    with connections[ALIAS].cursor() as cur:
        cur.execute(SQL.sql("preview"), {"handle": handle})
        return list(cur.fetchall())


def memberships(handle: str, communities: int = 2) -> list[dict[str, str]]:
    """Every place the person's data is: each community where they are or were a member or where a named
    table holds a row of theirs, then their own records (always last); refused, with the counts, when
    one holds more rows than one effect may change (`RECEIVER_MAX_ROWS`): such a person is handled
    apart, never half-applied. Each entry carries the digest of the rules it was read under."""
    found = _rows(handle)
    limit = int(getattr(settings, "RECEIVER_MAX_ROWS", bounds.MAX_ROWS))
    big = [(n, rows + agents) for _, n, _, rows, agents, _, _ in found if rows + agents > limit]
    if big:
        said = ", ".join(f"{count:,} in {n}" for n, count in big)
        raise effects.Refused(
            f"{handle} has more rows than one effect may change here ({said}; the limit is {limit:,})"
        )
    digest = rules()["digest"]
    return [{"id": str(cid), "role": role, "rules": digest} for cid, _, role, _, _, _, _ in found]


def preview(handle: str, community_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Per community asked about: what the person holds there now. A community where nothing of theirs
    is left (its effects applied, their membership gone) still answers, with nothing and the data
    version this receiver keeps for them there: an approval of the rest of a case it began sees it."""
    wanted = set(community_ids)
    reasons = {e.table: e.reason for e in compiled().entries if e.action == "keep"}
    found = {
        str(cid): {
            "id": str(cid),
            "name": n,
            "membership": role,
            "rows": rows,
            "agents": agents,
            "version": version,
            "rules": rules(),
            "kept": {t: {"rows": k, "reason": reasons.get(t, "")} for t, k in _json(kept).items() if k},
        }
        for cid, n, role, rows, agents, kept, version in _rows(handle)
        if str(cid) in wanted
    }
    with connections[ALIAS].cursor() as cur:
        cur.execute(SQL.sql("emptied"), {"handle": handle})
        for cid, key, version in cur.fetchall():
            if str(cid) in wanted and str(cid) not in found:
                found[str(cid)] = {
                    "id": str(cid),
                    "name": f"community {key} (nothing of theirs left)",
                    "membership": compile.NOT_A_MEMBER,
                    "rows": 0,
                    "agents": 0,
                    "version": version,
                    "rules": rules(),
                    "kept": {},
                }
    return found


def _json(value: Any) -> dict[str, Any]:
    return json.loads(value) if isinstance(value, str) else dict(value or {})


def fence(request_id: UUID) -> int:
    with connections[ALIAS].cursor() as cur:
        row = SQL.one(cur, "fence", request_id=request_id)
    return int(row[0]) if row else 0


def withdraw(token: str) -> int:
    request_id, epoch = effects.withdrawal(token)
    with connections[ALIAS].cursor() as cur:
        row = SQL.one(cur, "withdraw", request_id=request_id, epoch=epoch, now=timezone.now())
    assert row is not None
    return int(row[0])


def apply(token: str) -> dict[str, Any]:
    """The effect in its own bounded transaction (`complete.run`: the generated apply, and the
    completeness walk when it is the person's last); a constraint broken is named by the file's entry."""
    c = compiled()

    lock_ms = int(getattr(settings, "RECEIVER_LOCK_TIMEOUT_MS", bounds.LOCK_TIMEOUT_MS))
    bound_ms = int(getattr(settings, "RECEIVER_STATEMENT_TIMEOUT_MS", bounds.STATEMENT_TIMEOUT_MS))

    def effect(cur: Any, params: dict[str, Any]) -> tuple[Any, ...]:
        # The transaction as a whole within the bound: the walk after the apply is given what is left of it.
        deadline = time.monotonic() + bound_ms / 1000

        def bounded() -> None:
            left = max(1, int((deadline - time.monotonic()) * 1000))
            SQL.one(cur, "bounded", lock_timeout=f"{lock_ms}ms", statement_timeout=f"{left}ms")

        bounded()
        return complete.run(cur, c, params, bounded)

    try:
        return effects.apply(token, effect)
    except complete.Incomplete as exc:
        raise effects.Incomplete(str(exc)) from None
    except complete.Mismatched as exc:
        raise effects.RulesChanged(str(exc)) from None
    except effects.Broken as exc:
        raise effects.Broken(complete.broken(c, exc.table, exc.constraint, exc.message), table=exc.table) from None


def lookup(operation_id: UUID) -> effects.Found | effects.NotFound:
    """What this receiver recorded for an operation, as of its watermark; Unreadable when it cannot say."""
    now = timezone.now()
    until = parse_datetime(getattr(settings, "RECEIVER_TEST_UNREADABLE_UNTIL", "") or "")
    if until is not None and now < until:
        raise effects.Unreadable(f"the receiver's records cannot be read until {until.isoformat()}")
    watermark: datetime = now - timedelta(seconds=int(getattr(settings, "RECEIVER_TEST_LOOKUP_LAG_SECONDS", 0)))
    with connections[ALIAS].cursor() as cur:
        row = SQL.one(cur, "lookup", operation_id=operation_id, watermark=watermark)
    if row is None:
        return effects.NotFound(watermark)
    _, evidence, grant, applied_at = row
    # The operation id names the request, the stage and the community: a grant of ours for it is a grant
    # for this effect.
    made = effects.made_by(grant)
    effects.check_matches(grant, operation_id, applied_at, {**made, "operation_id": str(operation_id)})
    return effects.Found(json.loads(evidence) if isinstance(evidence, str) else evidence)
