"""Retention: how long each kind of record lives, and the job that applies it.

A closed case past its period becomes a tombstone (ids, dates, outcome, approver ids, operation ids
and its proof's digest; no personal identifiers) and every other row of it is deleted; before that,
its lease history and its copies of the target system's evidence go after their own (shorter)
periods, and sent notifications after theirs. The job never touches an open case, a case under a
records hold, or one whose investigation is open (an alarm not resolved, a withdrawal the target
has not acknowledged). It works in batches, each case in its own transaction, stops at its time
budget, and logs every run with its counts (`RetentionRun`).

The database holds that rule too: the job deletes only through the retention functions (ops
migration 0016, named statements in `retention.sql`), which check the case again under its lock
(closed, past the period given, no records hold, no open investigation: the view `retention_cases`,
which the job's candidates read as well) before they open the one pass the evidence triggers let a
row go under (`core.lifecycle.RETAINED`). A case refused there (a hold placed since it was read) is
kept and counted so.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q

from api.models import IdempotencyKey
from core import authority, clock, proofs
from core.authority import Actor
from core.errors import BadInput, Refused, required_reason, shown
from core.sql import Statements
from core.store import lock_or_not_found, parse_id
from deletions import proof as deletion_proof
from deletions.models import DeletionRequest
from ops.models import RecordsHold, RetentionRun, Tombstone
from retirements import proof as retirement_proof
from retirements.models import RetirementRequest

IDEMPOTENCY_DAYS = timedelta(days=1)
KINDS = ("closed_case", "decision_log", "lease_history", "target_evidence", "notifications")
WORDS = {
    "closed_case": "closed case details (then a tombstone)",
    "decision_log": "decision logs (go with the case: its tombstone waits for both)",
    "lease_history": "lease events and attempts of a closed case",
    "target_evidence": "a closed case's copies of the target system's evidence",
    "notifications": "notifications sent",
}
HOLD = "ops.place_recordshold"
CASE_KINDS = ("deletion", "retirement")
SQL = Statements.beside(__file__, "retention.sql")
logger = logging.getLogger("ops")


def periods(closed_case_days: int | None = None) -> dict[str, int]:
    """The periods in days, from settings; `closed_case_days` overrides, for one run, the period of
    closed cases and of their decision logs (which go with them)."""
    chosen = dict(settings.RETENTION_DAYS)
    if closed_case_days is not None:
        if closed_case_days < 0:
            raise BadInput(f"--closed-case-days {closed_case_days} is refused: a number of days, 0 or more")
        chosen["closed_case"] = chosen["decision_log"] = closed_case_days
    return chosen


@dataclass(frozen=True)
class Verdict:
    tombstone: bool = False
    lease_history: bool = False
    evidence: bool = False
    kept: str = ""  # why nothing is done although a period passed


def verdict(*, closed_at: datetime, now: datetime, days: dict[str, int], held: bool, investigating: bool) -> Verdict:
    """What the job does to one closed case. Pure."""
    age = now - closed_at

    def past(kind: str) -> bool:
        return age >= timedelta(days=days[kind])

    wants = past("closed_case") and past("decision_log"), past("lease_history"), past("target_evidence")
    if not any(wants):
        return Verdict()
    if held:
        return Verdict(kept="under a records hold")
    if investigating:
        return Verdict(kept="its investigation is open")
    tomb, lease, evidence = wants
    return Verdict(tombstone=tomb, lease_history=lease and not tomb, evidence=evidence and not tomb)


def _candidates(kind: str, cutoff: datetime, limit: int, after: Any) -> list[Any]:
    """Closed cases of `kind` that closed by `cutoff`, after `after` (closed_at, id), oldest first:
    their rows, each with `closed_at`, `held` and `investigating` as the database's rule reads them."""
    with connection.cursor() as cur:
        cur.execute(
            SQL.sql("candidates"),
            {
                "kind": kind,
                "cutoff": cutoff,
                "after_at": after[0] if after else None,
                "after_id": after[1] if after else None,
                "limit": limit,
            },
        )
        rows = cur.fetchall()
    model = DeletionRequest if kind == "deletion" else RetirementRequest
    found: dict[Any, Any] = model.objects.in_bulk([r[0] for r in rows])
    cases = []
    for case_id, closed_at, held, investigating in rows:
        if case_id in found:
            req = found[case_id]
            req.closed_at, req.held, req.investigating = closed_at, held, investigating
            cases.append(req)
    return cases


def _counted(row: tuple[Any, ...] | None) -> dict[str, int]:
    """A retention function's counts by kind (JSON: Django's connection reads jsonb as text)."""
    value = row[0] if row else {}
    return dict(json.loads(value) if isinstance(value, str) else value)


def _tombstone(kind: str, req: Any, now: datetime, run: RetentionRun) -> Tombstone:
    """What stays of the case: ids, dates, outcome, who approved (user ids), the operations and
    the digest of its proof's record (the same digest every proof of the closed case carries)."""
    if kind == "deletion":
        record = deletion_proof.record(req)
        opened, operations = req.created_at, [s["operation_id"] for s in record["stages"]]
        deciders = req.approvals.values_list("approved_by_user_id", flat=True)
    else:
        record = retirement_proof.record(req)
        opened, operations = req.requested_at, [record["purge"]["operation_id"]] if record["purge"] else []
        deciders = req.decisions.values_list("actor_id", flat=True)
    return Tombstone(
        case_kind=kind,
        case_id=req.id,
        opened_at=opened,
        closed_at=req.closed_at,
        outcome=req.status,
        approver_ids=sorted({a for a in deciders if a}),
        operation_ids=operations,
        proof_digest=proofs.digest(record),
        made_at=now,
        run=run,
    )


def _forget(model: Any, old: Q, what: str, counts: Counter[str], batch: int, dry_run: bool) -> None:
    """Rows of no case that are past their period: at most ten batches a run, the rest next run."""
    ids = list(model.objects.filter(old).values_list("id", flat=True)[: batch * 10])
    if ids:
        counts[f"{what} deleted"] += len(ids) if dry_run else model.objects.filter(id__in=ids).delete()[0]


def run(
    *,
    dry_run: bool = False,
    closed_case_days: int | None = None,
    budget_seconds: float | None = None,
    batch: int | None = None,
) -> RetentionRun:
    """One pass over what is past its period (see the module). A dry run decides the same and
    writes nothing but its own log row."""
    now = clock.now()
    days = periods(closed_case_days)
    budget = settings.RETENTION_SECONDS if budget_seconds is None else budget_seconds
    batch = batch or settings.RETENTION_BATCH
    started = time.monotonic()
    counts: Counter[str] = Counter()
    log = RetentionRun.objects.create(started_at=now, dry_run=dry_run, periods=days)
    cutoff = now - timedelta(days=min(days["closed_case"], days["lease_history"], days["target_evidence"]))
    stopped = False
    for kind in CASE_KINDS:
        after = None
        while not stopped:
            rows = _candidates(kind, cutoff, batch, after)
            for req in rows:
                if time.monotonic() - started > budget:
                    stopped = True
                    break
                after = (req.closed_at, req.id)
                _apply(kind, req, now, days, log, counts, dry_run=dry_run)
            if len(rows) < batch:
                break
    if not stopped:
        # Sent notifications and final webhook deliveries past their period (but a held case's).
        with connection.cursor() as cur:
            forgot = SQL.one(cur, "forget", days=days["notifications"], most=batch * 10, dry=dry_run)
        for what, n in _counted(forgot).items():
            if n:
                counts[f"{what} deleted"] += n
        # An Idempotency-Key answers repeats for a day, as Stripe's do; then it is forgotten.
        old_keys = Q(created_at__lt=now - IDEMPOTENCY_DAYS)
        _forget(IdempotencyKey, old_keys, "idempotency keys", counts, batch, dry_run)
    log.finished_at = clock.now()
    log.counts = dict(sorted(counts.items()))
    log.stopped_early = stopped
    log.save(update_fields=["finished_at", "counts", "stopped_early"])
    return log


def _apply(
    kind: str, req: Any, now: datetime, days: dict[str, int], log: RetentionRun, counts: Counter[str], *, dry_run: bool
) -> None:
    v = verdict(closed_at=req.closed_at, now=now, days=days, held=req.held, investigating=req.investigating)
    if v.kept:
        counts[f"{kind}s kept: {v.kept}"] += 1
        return
    if not (v.tombstone or v.lease_history or v.evidence):
        return
    if dry_run:
        counts[f"{kind} tombstones" if v.tombstone else f"{kind}s trimmed"] += 1
        return
    done: Counter[str] = Counter()
    try:
        with transaction.atomic(), connection.cursor() as cur:
            if v.tombstone:
                _tombstone(kind, req, now, log).save()
                period = max(days["closed_case"], days["decision_log"])
                erased = SQL.one(cur, "erase_case", kind=kind, case_id=req.id, days=period)
                for name, n in _counted(erased).items():
                    done[f"{kind} rows deleted: {name}"] += n
                done[f"{kind} tombstones"] += 1
            if v.lease_history:
                dropped = SQL.one(cur, "drop_lease_history", case_id=req.id, days=days["lease_history"])
                done["deletion rows deleted: lease_history"] += dropped[0] if dropped else 0
            if v.evidence:
                dropped = SQL.one(cur, "drop_evidence", case_id=req.id, days=days["target_evidence"])
                done["deletion stages: evidence dropped"] += dropped[0] if dropped else 0
    except IntegrityError as exc:  # refused by the database: something keeps it since it was read
        logger.warning("retention kept %s=%s: %s", kind, req.id, str(exc).splitlines()[0])
        counts[f"{kind}s kept: refused by the database"] += 1
        return
    counts.update(done)


# Records holds: a staff decision with a reason, on either workflow's case.


def _case(kind: str, case_id: str | UUID) -> Any:
    if kind not in CASE_KINDS:
        raise BadInput(f"--kind {shown(kind)} is refused: deletion or retirement")
    model = DeletionRequest if kind == "deletion" else RetirementRequest
    # Locked: a hold placed while the retention job erases the case waits, then finds it gone.
    return lock_or_not_found(model.objects.all(), parse_id(case_id), f"{kind} case")


def place_hold(*, actor: Actor, kind: str, case_id: str | UUID, reason: str) -> RecordsHold:
    authority.require(actor, HOLD)
    reason = required_reason(reason, "place a records hold")
    with transaction.atomic():
        case = _case(kind, case_id)
        if (
            RecordsHold.objects.select_for_update()
            .filter(case_kind=kind, case_id=case.pk, released_at__isnull=True)
            .exists()
        ):
            raise Refused(f"{kind} {case.pk} is already under a records hold")
        return RecordsHold.objects.create(
            case_kind=kind, case_id=case.pk, reason=reason, placed_by=actor.user, placed_at=clock.now()
        )


def release_hold(*, actor: Actor, kind: str, case_id: str | UUID, reason: str) -> RecordsHold:
    authority.require(actor, HOLD)
    reason = required_reason(reason, "release a records hold")
    with transaction.atomic():
        case = _case(kind, case_id)
        hold = (
            RecordsHold.objects.select_for_update()
            .filter(case_kind=kind, case_id=case.pk, released_at__isnull=True)
            .first()
        )
        if hold is None:
            raise Refused(f"{kind} {case.pk} is under no records hold")
        hold.released_at, hold.released_by, hold.release_reason = clock.now(), actor.user, reason
        hold.save(update_fields=["released_at", "released_by", "release_reason"])
        return hold
