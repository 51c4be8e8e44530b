"""Reads the services, the watcher, the commands, the admin and ops share (the ORM, read only;
the reads every watcher tick makes are named statements, `selectors.sql`)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection
from django.db.models import Count, F, Max, Q, QuerySet

from core import clock
from core.errors import NotFound, shown
from core.present import Story
from core.sql import Statements
from core.store import get_or_not_found, parse_id
from retirements import case, policy
from retirements.contract import DECISION_NOTICES, ROTA, STALLED_ALARM, SlotView
from retirements.models import (
    OPEN_REQUEST_STATUSES,
    Alarm,
    NoticeSlot,
    NoticeStatus,
    RequestStatus,
    RetirementRequest,
    Workspace,
)

SQL = Statements(Path(__file__).with_name("selectors.sql"))  # the watcher tick's reads


def get(request_id: str | UUID) -> RetirementRequest:
    rid = parse_id(request_id)
    return get_or_not_found(
        RetirementRequest.objects.select_related("workspace", "requested_by", "owner"), rid, "retirement request"
    )


def slot_views(request: RetirementRequest) -> list[SlotView]:
    """The request's notice slots as the pure policy sees them (those still to settle:
    `store.notices.pending_slots`, read under the step's lock)."""
    slots = NoticeSlot.objects.filter(request=request)
    return [
        SlotView(s.id, s.kind, s.due_at, s.status, s.next_attempt_at, s.claim_expires_at, s.delivered_at) for s in slots
    ]


def workspace(slug: str) -> Workspace:
    found = Workspace.objects.filter(slug=slug).first()
    if found is None:
        raise NotFound(f"no workspace with slug {shown(slug)}")
    return found


def open_request(workspace: Workspace) -> RetirementRequest | None:
    return RetirementRequest.objects.filter(workspace=workspace, status__in=OPEN_REQUEST_STATUSES).first()


def undelivered_gating(request: RetirementRequest) -> tuple[str, ...]:
    return tuple(
        NoticeSlot.objects.filter(request=request, gating=True)
        .exclude(status__in=[NoticeStatus.DELIVERED, NoticeStatus.SUPPRESSED])
        .values_list("kind", flat=True)
    )


def due_batch(now: datetime, *, seen: set[UUID], active: tuple[str, ...], limit: int) -> list[tuple[UUID, UUID]]:
    """The next (request, watcher) pairs due a watcher step, oldest wake-up first, leaving out
    `seen` (stepped by this tick already): waiting, woken, the authoritative watcher `active`."""
    params: dict[str, Any] = {"now": now, "active": [str(s) for s in active], "seen": list(seen), "limit": limit}
    with connection.cursor() as cur:
        cur.execute(SQL.sql("due_batch"), params)
        return [(request_id, watcher_id) for request_id, watcher_id in cur.fetchall()]


def queued_purges() -> list[int]:
    with connection.cursor() as cur:
        cur.execute(SQL.sql("queued_purges"))
        return [job_id for (job_id,) in cur.fetchall()]


def due_slot_ids_after_ponr(now: datetime) -> list[int]:
    """Due notices no watcher step sends: those of requests past the point of no return
    (destruction_started, even once purged), and the decisions' notices (held, released,
    cancelled, closed at the point of no return), which no wake-up plans; a watcher step may
    claim a decision's notice first: never both (the claim decides)."""
    with connection.cursor() as cur:
        cur.execute(SQL.sql("due_after_ponr"), {"now": now, "decision_kinds": list(DECISION_NOTICES.values())})
        return [slot_id for (slot_id,) in cur.fetchall()]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def summary(request_id: UUID, *keys: str) -> dict[str, Any]:
    """The named fields of a freshly read request, as `describe` spells them."""
    data = describe(get(request_id))
    return {k: data[k] for k in keys}


def custody_times(request: RetirementRequest) -> tuple[datetime | None, datetime | None]:
    """The request's next check and deadline (`policy.custody_times`, with the hold review setting)."""
    return policy.custody_times(
        status=request.status,
        eligible_at=request.eligible_at,
        next_wake_at=request.next_wake_at,
        held_at=request.held_at,
        hold_limit=timedelta(days=settings.RETIREMENT_HOLD_ALARM_DAYS),
    )


def purge_refusal(request: RetirementRequest) -> str:
    """Why the purge was refused, while the request waits on it ("" otherwise)."""
    if request.status != RequestStatus.EXECUTING:
        return ""
    job = getattr(request, "purge_job", None)
    return job.refusal if job is not None and job.status == "refused" else ""


def story(request: RetirementRequest, now: datetime) -> Story:
    """`case.story` from the saved rows: the watcher's stall, a refused purge, the next check and
    deadline (`custody_times`), read once here for every face."""
    return case.story(
        request, stall_reason(request, now), purge_refusal(request), times=custody_times(request), rota=ROTA
    )


def describe(request: RetirementRequest, now: datetime | None = None) -> dict[str, Any]:
    ws = request.workspace
    job = getattr(request, "purge_job", None)
    told = story(request, now or clock.now())
    return {
        "story": told.as_json(),
        "responsible": told.person,
        "backup": told.backup,
        "responsible_why": told.why_nobody or None,
        "id": str(request.id),
        "status": request.status,
        "workspace": {"slug": ws.slug, "lifecycle": ws.lifecycle, "legal_hold": ws.legal_hold},
        "requested_by": request.requested_by.get_username(),
        "reason": request.reason,
        "requested_at": _iso(request.requested_at),
        "eligibility_policy": request.eligibility_policy,
        "eligible_at": _iso(request.eligible_at),
        "next_wake_at": _iso(request.next_wake_at),
        **dict(zip(("next_check_at", "deadline"), map(_iso, custody_times(request)), strict=True)),
        "owner": request.owner.get_username() if request.owner else None,
        "last_action": request.last_action,
        "hold": {"held_at": _iso(request.held_at), "reason": request.hold_reason} if request.held_at else None,
        "blocker": {"reason": request.blocker, "until": _iso(request.blocked_until)} if request.blocker else None,
        "conclusion": request.conclusion or None,
        "notices": [
            {
                "kind": n.kind,
                "due_at": _iso(n.due_at),
                "gating": n.gating,
                "status": n.status,
                "attempts": n.attempts,
                "last_error": n.last_error or None,
                "moved_because": n.moved_because or None,
            }
            for n in request.notices.order_by("due_at", "id")
        ],
        "watchers": [
            {
                "id": str(w.id),
                "status": w.status,
                "authoritative": w.id == request.watcher_id,
                "started_at": _iso(w.started_at),
                "heartbeat_at": _iso(w.heartbeat_at),
                "conclusion": w.conclusion or None,
                "replaces": str(w.replaces_id) if w.replaces_id else None,
            }
            for w in request.watchers.order_by("created_at")
        ],
        "purge_job": {"operation_id": str(job.operation_id), "status": job.status} if job else None,
        "decisions": [
            {"at": _iso(d.created_at), "actor": d.actor_label, "action": d.action, "reason": d.reason}
            for d in request.decisions.order_by("created_at", "id")
        ],
        "alarms": [
            {"kind": a.kind, "message": a.message, "resolved": a.resolved_at is not None} for a in request.alarms.all()
        ],
    }


# Stalled watchers: the overview's list, health, metrics and the watcher's alarms.


def stall_reason(request: RetirementRequest, now: datetime) -> str | None:
    """Why this request's watcher counts as stalled (the pure policy decides), or None."""
    if request.status != RequestStatus.WAITING:
        return None
    w = request.watcher
    if w is None:
        return "no watcher"
    return policy.is_stalled(
        watcher_status=w.status,
        watcher_started=w.started_at is not None,
        created_at=w.created_at,
        next_wake_at=request.next_wake_at,
        alive_until=alive_until(request),
        now=now,
    )


LIVE_CLAIM = Max("notices__claim_expires_at", filter=Q(notices__status="sending"))


def alive_until(request: RetirementRequest) -> datetime | None:
    """Until when the request's watcher shows a sign of life: its heartbeat plus the notice claim
    time, or the latest notice claim it holds that has not run out (a watcher between a send and
    saving it holds one). None: it never beat and claims nothing."""
    w = request.watcher
    beat = (
        w.heartbeat_at + timedelta(seconds=settings.RETIREMENT_NOTICE_CLAIM_SECONDS) if w and w.heartbeat_at else None
    )
    claim = (
        request.live_claim  # type: ignore[attr-defined]
        if hasattr(request, "live_claim")  # annotated by a list (LIVE_CLAIM): no query per row
        else RetirementRequest.objects.filter(id=request.id).aggregate(until=LIVE_CLAIM)["until"]
    )
    signs = [t for t in (beat, claim) if t is not None]
    return max(signs) if signs else None


def _stalled(now: datetime, *, unalarmed: bool = False, limit: int | None = None) -> tuple[list[UUID], int]:
    """Up to `limit` ids of waiting requests the stall rule may match, and how many match in all
    (`selectors.sql` stalled: three indexed branches); the pure policy has the last word on each."""
    params: dict[str, Any] = {
        "cutoff": now - policy.STALL_GRACE,
        "now": now,
        "beat_cutoff": now - timedelta(seconds=settings.RETIREMENT_NOTICE_CLAIM_SECONDS),
        "unalarmed": unalarmed,
        "alarm": STALLED_ALARM,
        "limit": limit,
    }
    with connection.cursor() as cur:
        cur.execute(SQL.sql("stalled"), params)
        rows = cur.fetchall()
    return [request_id for request_id, _ in rows], (rows[0][1] if rows else 0)


def count_stalls(*, now: datetime) -> int:
    """How many watchers are stalled (health, metrics): counted in SQL, one id loaded."""
    return _stalled(now, limit=1)[1]


def detect_stalls(*, now: datetime, limit: int = 50, unalarmed: bool = False) -> list[tuple[RetirementRequest, str]]:
    """Up to `limit` stalled requests with why (the overview's list, the watcher's alarms), oldest
    wake-up first; `unalarmed` leaves out those whose stall alarm is already open."""
    ids, _ = _stalled(now, unalarmed=unalarmed, limit=limit * 2)
    if not ids:  # the common tick: nothing stalled, no second query built
        return []
    candidates = (
        RetirementRequest.objects.filter(id__any_of=ids)
        .select_related("watcher", "workspace")
        .annotate(live_claim=LIVE_CLAIM)
        .order_by(F("next_wake_at").asc(nulls_first=True), "id")
    )
    stalled: list[tuple[RetirementRequest, str]] = [
        (request, why) for request in candidates if (why := stall_reason(request, now))
    ]
    return stalled[:limit]


def aged(*, now: datetime, lifetime: Any, hold_limit: Any, limit: int) -> list[RetirementRequest]:
    """Open requests whose age may raise an alarm (`policy.age_alarms` decides), without an open
    alarm of that kind yet: requested before the lifetime warning, or held past the hold limit."""

    def open_alarm(kind: str) -> Any:
        return Alarm.objects.filter(kind=kind, resolved_at__isnull=True).values("request_id")

    open_ = RetirementRequest.objects.filter(status__in=[RequestStatus.WAITING, RequestStatus.HELD])
    old = open_.filter(requested_at__lte=now - lifetime + policy.AGE_WARNING).exclude(
        id__in=open_alarm(policy.WATCHER_AGE)
    )
    held = RetirementRequest.objects.filter(status=RequestStatus.HELD, held_at__lte=now - hold_limit).exclude(
        id__in=open_alarm(policy.HOLD_AGE)
    )  # (status, next_wake_at) narrows to the few on hold
    found = {r.id: r for r in [*old.order_by("requested_at", "id")[:limit], *held.order_by("held_at", "id")[:limit]]}
    return list(found.values())[:limit]


# The operations overview's lists (each one bounded query).


def held(limit: int) -> list[RetirementRequest]:
    return list(
        RetirementRequest.objects.filter(status=RequestStatus.HELD).select_related(
            "workspace", "owner", "backup", "watcher"
        )[:limit]
    )


def failed_notices(limit: int) -> list[NoticeSlot]:
    return list(NoticeSlot.objects.filter(status=NoticeStatus.FAILED).select_related("request__workspace")[:limit])


def open_alarm_kinds(request: RetirementRequest) -> set[str]:
    """The kinds of the case's open alarms."""
    return set(Alarm.objects.filter(request=request, resolved_at__isnull=True).values_list("kind", flat=True))


def alarm(alarm_id: int) -> Alarm:
    """An alarm with its case and the decision that closed it."""
    return Alarm.objects.select_related("request", "decision").get(id=alarm_id)


def open_alarms(limit: int) -> list[Alarm]:
    return list(Alarm.objects.filter(resolved_at__isnull=True).select_related("request__workspace")[:limit])


# Custody: the cases the rota names a backup for, each person's load, the cases waiting for someone.


def custody_candidates(limit: int) -> list[RetirementRequest]:
    """Open cases without an owner, without a backup, or whose backup became the owner."""
    unnamed = Q(owner__isnull=True) | Q(backup__isnull=True) | Q(backup=F("owner"))
    return list(
        RetirementRequest.objects.filter(status__in=OPEN_REQUEST_STATUSES)
        .filter(unnamed)
        .select_related("workspace")
        .order_by("updated_at", "id")[:limit]
    )


def unnamed(now: datetime, late: timedelta, cap: int = 1000) -> int:
    """Open cases with no owner named longer than `late` after their last move: the rota had nobody
    who may hold them, or no custody pass ran. A fault of the system, counted in health up to
    `cap` (through `retirement_open_owner`, nobody named)."""
    rows = RetirementRequest.objects.filter(
        status__in=OPEN_REQUEST_STATUSES, owner__isnull=True, updated_at__lte=now - late
    )
    return rows.values("id")[:cap].count()


def open_load(user_ids: list[int]) -> dict[int, int]:
    rows = (
        RetirementRequest.objects.filter(status__in=OPEN_REQUEST_STATUSES, owner_id__in=user_ids)
        .values("owner_id")
        .annotate(n=Count("id"))
    )
    return {r["owner_id"]: r["n"] for r in rows}


def waiting_for(user: Any) -> QuerySet[RetirementRequest]:
    """Open cases whose owner or backup is `user`."""
    return RetirementRequest.objects.filter(status__in=OPEN_REQUEST_STATUSES).filter(Q(owner=user) | Q(backup=user))
