"""Reads the services, the worker, the commands, the admin and ops share (the ORM, read only; a
run's first read in SQL)."""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any, NamedTuple
from uuid import UUID

from django.db import connection
from django.db.models import BooleanField, Count, Exists, ExpressionWrapper, F, OuterRef, Q, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Concat

from core.store import parse_id
from deletions import contract
from deletions.contract import CancelFacts, StageSnapshot, chain_order
from deletions.errors import UnknownRequest
from deletions.models import (
    OPEN_STATUSES,
    DeletionAlarm,
    DeletionRequest,
    OperatorRecord,
    StageHistory,
    Status,
)


def parse_request_id(raw: str | UUID) -> UUID:
    return parse_id(raw)


def get_request(request_id: str | UUID) -> DeletionRequest:
    rid = parse_request_id(request_id)
    try:
        return DeletionRequest.objects.get(id=rid)
    except DeletionRequest.DoesNotExist:
        raise UnknownRequest(f"no deletion request with id {rid}") from None


def target_of(request_id: UUID) -> str:
    """The request's target (a run given none reads it before its fence)."""
    with connection.cursor() as cur:
        cur.execute("SELECT target FROM entity_deletion_requests WHERE id = %s", [request_id])
        row = cur.fetchone()
    if row is None:
        raise UnknownRequest(f"no deletion request with id {request_id}")
    return str(row[0])


def stage_snapshot(row: StageHistory) -> StageSnapshot:
    return StageSnapshot(
        id=row.id,
        stage=row.stage,
        community_id=str(row.target_community_id) if row.target_community_id else None,
        status=row.status,
        is_current=row.is_current,
        metadata=row.metadata_json or {},
        started_at=row.started_at,
        finished_at=row.finished_at,
        last_error=row.last_error,
        operation_id=row.operation_id,
        attempts=row.attempts,
        submitted_at=row.submitted_at,
    )


def case_stages(request_id: UUID) -> list[StageSnapshot]:
    """Every stage of a case (one read), in creation order."""
    return [stage_snapshot(r) for r in StageHistory.objects.filter(request_id=request_id).order_by("created_at", "id")]


class SavedResult(NamedTuple):
    """A stage's saved result, where a receipt check reads it (`evidence.sweep`)."""

    stage_id: UUID
    request_id: UUID
    stage: str
    community_id: str | None
    operation_id: UUID
    target: str
    result: Any


# The newest cases' stages that hold a result (through `deletion_newest` and the stages' request
# index), then the next window of stages from `after` in key order (the primary key): both bounded,
# whatever the tables hold.
_RESULTS_TO_CHECK = """
    (SELECT true, s.id, s.request_id, s.stage, s.target_community_id, s.operation_id, r.target,
            s.metadata_json -> 'result'
     FROM (SELECT id, target, created_at FROM entity_deletion_requests
           ORDER BY created_at DESC, id DESC LIMIT %(newest)s) r
     JOIN entity_deletion_stage_history s ON s.request_id = r.id
     WHERE s.metadata_json ? 'result'
     ORDER BY r.created_at DESC, r.id DESC, s.created_at DESC, s.id DESC LIMIT %(newest)s)
    UNION ALL
    (SELECT false, s.id, s.request_id, s.stage, s.target_community_id, s.operation_id, r.target,
            s.metadata_json -> 'result'
     FROM entity_deletion_stage_history s JOIN entity_deletion_requests r ON r.id = s.request_id
     WHERE s.id > %(after)s AND s.metadata_json ? 'result'
     ORDER BY s.id LIMIT %(window)s)
"""


def results_to_check(*, newest: int, after: UUID, window: int) -> tuple[list[SavedResult], list[SavedResult]]:
    """Saved results to check against their receipts, in one query: those of the newest cases (at
    most `newest` stages, the newest first) and the next `window` in key order after `after`."""
    with connection.cursor() as cur:
        cur.execute(_RESULTS_TO_CHECK, {"newest": newest, "after": after, "window": window})
        rows = cur.fetchall()
    newest_first: list[SavedResult] = []
    swept: list[SavedResult] = []
    for row in rows:
        saved = SavedResult(
            row[1], row[2], row[3], str(row[4]) if row[4] else None, row[5], row[6],
            json.loads(row[7]) if isinstance(row[7], str) else row[7],
        )  # fmt: skip
        (newest_first if row[0] else swept).append(saved)
    return newest_first, swept


def load_history(request_id: UUID, limit: int) -> list[StageSnapshot]:
    """At most `limit` + 1 rows, so a caller can tell the bound was exceeded."""
    rows = StageHistory.objects.filter(request_id=request_id).order_by("created_at", "id")[: limit + 1]
    return [stage_snapshot(r) for r in rows]


def inspect(request_id: str | UUID) -> dict[str, Any]:
    """Request, approvals and stage chain (in previous_stage_id order) as plain data."""
    req = get_request(request_id)
    approvals = list(req.approvals.order_by("approved_at", "id"))
    rows = [stage_snapshot(r) for r in StageHistory.objects.filter(request=req).order_by("created_at", "id")]
    return {
        "request": {
            "id": str(req.id),
            "entity_type": req.entity_type,
            "target": req.target,
            "requested_by": req.requested_by,
            "status": req.status,
            "inventory": req.inventory_json,
            "inventory_version": req.inventory_version,
            "inventory_digest": req.inventory_digest,
            "lease_owner": req.lease_owner,
            "lease_generation": req.lease_generation,
            "lease_expires_at": _iso(req.lease_expires_at),
            "heartbeat_at": _iso(req.heartbeat_at),
            "retry_count": req.retry_count,
            "next_attempt_at": _iso(req.next_attempt_at),
            "last_error": req.last_error,
            "completed_at": _iso(req.completed_at),
            "created_at": _iso(req.created_at),
            "updated_at": _iso(req.updated_at),
            "owner": req.owner,
            "next_check_at": _iso(req.next_check_at),
            "open_question": req.open_question,
            "last_action": req.last_action,
            "cancel_requested_at": _iso(req.cancel_requested_at),
            "cancel_requested_by": req.cancel_requested_by,
            "cancel_reason": req.cancel_reason,
        },
        "approvals": [
            {
                "approved_by": a.approved_by,
                "approved_at": _iso(a.approved_at),
                "inventory_digest": a.inventory_digest,
                "expires_at": _iso(a.expires_at),
                "revoked_at": _iso(a.revoked_at),
            }
            for a in approvals
        ],
        "withdrawals": [
            {
                "epoch": w.epoch,
                "cause": w.cause,
                "created_at": _iso(w.created_at),
                "acknowledged_at": _iso(w.acknowledged_at),
                "acknowledged_where": w.acknowledged_where,
                "attempts": w.attempts,
                "last_error": w.last_error,
            }
            for w in req.withdrawals.order_by("epoch")
        ],
        "stages": [
            {
                "id": str(s.id),
                "stage": s.stage,
                "target_community_id": s.community_id,
                "status": s.status,
                "is_current": s.is_current,
                "started_at": _iso(s.started_at),
                "finished_at": _iso(s.finished_at),
                "operation_id": str(s.operation_id),
                "submitted_at": _iso(s.submitted_at),
                "attempts": s.attempts,
                "metadata_json": s.metadata,
                "evidence": s.evidence,
                "last_error": s.last_error,
            }
            for s in chain_order(rows)
        ],
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


# The operations overview's lists (each one bounded query).


# The one rule for "effect unknown": a current stage whose effect was submitted and not settled.
# A stage whose worker was lost before it submitted anything is not one: nothing was sent, and the
# next worker runs it. The panel, the list and the overview all read it through this.
UNSETTLED = Q(is_current=True, submitted_at__isnull=False) & ~Q(status="completed")

# How many communities a request's inventory lists (`rules.inventory.community_ids`, counted by
# the database): a list page reads this number, not each row's whole inventory (up to 1,000
# communities each).
COMMUNITY_COUNT = RawSQL(
    "COALESCE((jsonb_path_query_first(entity_deletion_requests.inventory_json, 'lax $.communities.size()'))::int, 0)",
    [],
)


def unsettled(request_id: UUID) -> bool:
    return StageHistory.objects.filter(UNSETTLED, request_id=request_id).exists()


def applied_stages(request_id: UUID) -> int:
    """How many of a case's stages were applied (completed): what a cancelled case's outcome says."""
    return StageHistory.objects.filter(request_id=request_id, status="completed").count()


def unsettled_stages(limit: int) -> list[StageHistory]:
    """Current stages submitted and not settled (`UNSETTLED`), oldest submission first, with their
    requests: the candidates the overview asks `case.effect_unknown` about."""
    return list(StageHistory.objects.filter(UNSETTLED).select_related("request").order_by("submitted_at", "id")[:limit])


def in_flight(limit: int) -> list[DeletionRequest]:
    """The cases a worker holds or may take next (approved, running, retrying), the longest
    unchanged first, each with `unsettled` (its current stage's effect submitted, not settled)."""
    unsettled_stage = StageHistory.objects.filter(UNSETTLED, request=OuterRef("pk"))
    return list(
        DeletionRequest.objects.filter(status__in=[Status.APPROVED, Status.RUNNING, Status.RETRY_WAIT])
        .annotate(unsettled=Exists(unsettled_stage))
        .order_by("updated_at", "id")[:limit]
    )


def _unsettled() -> Exists:
    """Whether a case's current stage was submitted and not settled (`UNSETTLED`), for a list's rows."""
    return Exists(StageHistory.objects.filter(UNSETTLED, request=OuterRef("pk")))


def for_stories(ids: Collection[UUID]) -> list[DeletionRequest]:
    """The cases `ids`, each read with what its story needs (`reading.story_of`): `unsettled`, its
    person and backup; one query for them all."""
    return list(
        DeletionRequest.objects.filter(id__in=list(ids))
        .annotate(unsettled=_unsettled())
        .select_related("assignee", "backup")
    )


def needing_attention(limit: int) -> list[DeletionRequest]:
    return list(
        DeletionRequest.objects.filter(status=Status.NEEDS_ATTENTION)
        .annotate(unsettled=_unsettled())
        .select_related("assignee", "backup")[:limit]
    )


def awaiting_approval(limit: int) -> list[DeletionRequest]:
    return list(
        DeletionRequest.objects.filter(status__in=[Status.SUBMITTED, Status.NEEDS_REVIEW])
        .annotate(unsettled=_unsettled())
        .select_related("assignee", "backup")
        .order_by("created_at")[:limit]
    )


def open_alarms(limit: int) -> list[DeletionAlarm]:
    return list(DeletionAlarm.objects.filter(resolved_at__isnull=True).select_related("request")[:limit])


def cancel_facts(req: DeletionRequest, now: datetime) -> CancelFacts:
    """What a cancellation of this (locked) request meets."""
    stages = StageHistory.objects.filter(request_id=req.id)
    unsettled = (
        stages.filter(is_current=True, submitted_at__isnull=False)
        .exclude(status="completed")
        .values_list("operation_id", "stage")
        .first()
    )
    return CancelFacts(
        worker_live=req.lease_owner is not None and req.lease_expires_at is not None and req.lease_expires_at > now,
        unsettled=unsettled,
        started=stages.exists(),
        completed=stages.filter(status="completed").count(),
    )


# Custody: whom the rota names, and the cases waiting for someone.
NAMED_FOR_NOW = Q(assigned_for__startswith=Concat(F("status"), Value(":")))  # named since its last move


def _custody_rows() -> QuerySet[DeletionRequest]:
    unsettled_stage = StageHistory.objects.filter(UNSETTLED, request=OuterRef("pk"))
    return (
        DeletionRequest.objects.filter(status__in=OPEN_STATUSES)
        .annotate(
            unsettled=Exists(unsettled_stage),
            named_now=ExpressionWrapper(NAMED_FOR_NOW, output_field=BooleanField()),
        )
        .select_related("assignee", "backup")
    )


def custody_candidates(limit: int) -> list[DeletionRequest]:
    """Open cases that may need naming again: their state changed since they were named, or they
    are in a state where who must act depends on more than the state (`case.rota_for` decides)."""
    # Those whose state moved since they were named come first, so cases named for their state
    # already (re-read only because their state alone does not say who answers) never crowd them out.
    return list(
        _custody_rows()
        .filter(~NAMED_FOR_NOW | Q(status__in=[Status.RUNNING, Status.RETRY_WAIT, Status.NEEDS_ATTENTION]))
        .order_by("named_now", "updated_at", "id")[:limit]
    )


def custody_candidate(request_id: UUID) -> DeletionRequest | None:
    """One open case as `custody_candidates` reads it; None once it has ended."""
    return _custody_rows().filter(id=request_id).first()


def unnamed(now: datetime, late: timedelta, cap: int = 1000) -> int:
    """Open cases with no person named that wait on a rota: the rota had nobody who may hold them,
    or no custody pass named anyone since their state moved longer than `late` ago. A fault of the
    system (a group is never the answer to who holds a case), counted in health up to `cap`: read
    through the open cases' assignee index (`deletion_open_assignee`, nobody named), so its cost
    does not grow with the cases people hold."""
    rota_named_nobody = NAMED_FOR_NOW & (
        Q(assigned_for__endswith=f":{contract.APPROVERS}") | Q(assigned_for__endswith=f":{contract.OPERATORS_ON_CALL}")
    )
    on_a_person = Q(status__in=[Status.SUBMITTED, Status.NEEDS_REVIEW, Status.NEEDS_ATTENTION]) | (
        Q(status=Status.RETRY_WAIT) & ~Q(open_question="")
    )
    stale = on_a_person & ~NAMED_FOR_NOW & Q(updated_at__lte=now - late)
    rows = DeletionRequest.objects.filter(status__in=OPEN_STATUSES, assignee__isnull=True)
    return rows.filter(rota_named_nobody | stale).values("id")[:cap].count()


def open_load(user_ids: list[int]) -> dict[int, int]:
    """Open cases each of these people holds now (as person)."""
    rows = (
        DeletionRequest.objects.filter(status__in=OPEN_STATUSES, assignee_id__in=user_ids)
        .values("assignee_id")
        .annotate(n=Count("id"))
    )
    return {r["assignee_id"]: r["n"] for r in rows}


def waiting_for(user: Any, rotas: list[str]) -> QuerySet[DeletionRequest]:
    """The open cases that may wait on `user`, `unsettled` annotated: those naming them person or
    backup, those whose saved owner is a rota they are on and named to nobody for the state they are
    in, and, for the operators on call, those whose effect may be unknown whatever their saved owner.
    Which of them do is the case's story's to say (`reading.waiting_for`)."""
    unsettled = _unsettled()
    may = Q(assignee=user) | Q(backup=user) | (Q(owner__in=rotas) & ~NAMED_FOR_NOW)
    if contract.OPERATORS_ON_CALL in rotas:
        may |= Q(status__in=[Status.APPROVED, Status.RUNNING]) & Q(unsettled=True)
    return (
        DeletionRequest.objects.filter(status__in=OPEN_STATUSES)
        .annotate(unsettled=unsettled)
        .filter(may)
        .select_related("assignee", "backup")
    )


COUNT_CAP = 10_000  # counts of open work stop here: the lists say "10,000 or more"


def past_deadline(now: datetime) -> QuerySet[DeletionRequest]:
    """Open requests past their legal deadline, the oldest deadline first (index `deletion_due`)."""
    return DeletionRequest.objects.filter(status__in=OPEN_STATUSES, due_at__lte=now).order_by("due_at")


def needing_a_person() -> QuerySet[DeletionRequest]:
    """Requests needing attention, the longest waiting first (index `deletion_needing_attention`)."""
    return DeletionRequest.objects.filter(status=Status.NEEDS_ATTENTION).order_by("updated_at")


def deadlines(now: datetime, soon: datetime, limit: int) -> dict[str, Any]:
    """Open requests due between now and `soon` (a capped count), and the soonest due of those
    and of those past their deadline (the count past it is health's work, `past_deadline`)."""
    open_ = DeletionRequest.objects.filter(status__in=OPEN_STATUSES)
    return {
        "soon": open_.filter(due_at__gt=now, due_at__lte=soon).order_by("due_at")[:COUNT_CAP].count(),
        "first": list(
            open_.filter(due_at__lte=soon)
            .annotate(unsettled=_unsettled())
            .select_related("assignee", "backup")
            .order_by("due_at", "id")[:limit]
        ),
    }


# Faults and the records of effects applied by hand: what approval, resume, record and close check.


class Faults(NamedTuple):
    open: frozenset[str]  # the kinds of the case's open faults (`contract.FAULT_ALARMS`)
    applied_after: bool  # an effect was recorded applied by hand after withdrawal, its alarm open or closed


def faults(request_id: UUID) -> Faults:
    rows = list(
        DeletionAlarm.objects.filter(request_id=request_id, kind__in=contract.FAULT_ALARMS).values_list(
            "kind", "resolved_at"
        )
    )
    return Faults(
        frozenset(kind for kind, resolved in rows if resolved is None),
        any(kind == contract.AFTER_WITHDRAWAL for kind, _ in rows),
    )


def handover_record(operation_id: UUID, attempt: int) -> OperatorRecord | None:
    """The record that answers the hand-over `attempt` of an operation (its first; corrections aside)."""
    return OperatorRecord.objects.filter(operation_id=operation_id, attempt=attempt, corrects__isnull=True).first()


def applied_record(operation_id: UUID) -> OperatorRecord | None:
    """The record of the operation applied by hand, if one says so (an effect is recorded applied once)."""
    return OperatorRecord.objects.filter(operation_id=operation_id, applied=True, corrects__isnull=True).first()


def latest_record(request_id: UUID) -> OperatorRecord | None:
    """The case's latest record of an effect applied by hand (a correction is later than what it corrects)."""
    return (
        OperatorRecord.objects.filter(request_id=request_id)
        .select_related("correction")
        .order_by("-recorded_at", "-id")
        .first()
    )


def recorders(request_id: UUID) -> set[str]:
    """Who recorded an effect on this case as applied by hand (not who corrected such a record)."""
    records = OperatorRecord.objects.filter(request_id=request_id, applied=True, corrects__isnull=True)
    return set(records.values_list("recorded_by", flat=True))
