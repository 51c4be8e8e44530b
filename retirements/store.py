"""The retirement store, the only writer of this app's tables.

Locks in one fixed order (workspace, then request, then watcher / slot / job),
applies what the services and the pure policy decided, and logs each decision.
Rules live in `policy` (pure) and `services` (staff decisions); nothing here
chooses what happens next.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, overload
from uuid import UUID

from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q

from core import authority, decisions
from core.authority import Actor
from core.errors import NotFound, shown
from core.store import fsm_target, get_or_not_found, lock_or_not_found, parse_id
from retirements import policy
from retirements.models import (
    OPEN_REQUEST_STATUSES,
    Alarm,
    Decision,
    Lifecycle,
    NoticeSlot,
    NoticeStatus,
    PurgeJob,
    PurgeStatus,
    RequestStatus,
    RetirementRequest,
    RetirementWatcher,
    WatcherStatus,
    Workspace,
)

logger = logging.getLogger("retirements")
ACTIVE_WATCHER = (WatcherStatus.PENDING, WatcherStatus.RUNNING)


# Reads


def get(request_id: str | UUID) -> RetirementRequest:
    rid = parse_id(request_id)
    return get_or_not_found(
        RetirementRequest.objects.select_related("workspace", "requested_by", "owner"), rid, "retirement request"
    )


def slot_views(request: RetirementRequest, *, pending_only: bool = False) -> list[policy.SlotView]:
    """The request's notice slots as the pure policy sees them (`pending_only`: not yet settled)."""
    slots = NoticeSlot.objects.filter(request=request)
    if pending_only:
        slots = slots.filter(status__in=[NoticeStatus.PENDING, NoticeStatus.SENDING])
    return [policy.SlotView(s.id, s.kind, s.due_at, s.status, s.next_attempt_at, s.claim_expires_at) for s in slots]


def open_request(workspace: Workspace) -> RetirementRequest | None:
    return RetirementRequest.objects.filter(workspace=workspace, status__in=OPEN_REQUEST_STATUSES).first()


def undelivered_gating(request: RetirementRequest) -> tuple[str, ...]:
    return tuple(
        NoticeSlot.objects.filter(request=request, gating=True)
        .exclude(status__in=[NoticeStatus.DELIVERED, NoticeStatus.SUPPRESSED])
        .values_list("kind", flat=True)
    )


def _due(now: datetime) -> Q:
    """Pending and due, or claimed by a sender whose claim ran out (it died between send and save)."""
    pending = Q(status=NoticeStatus.PENDING, due_at__lte=now) & ~Q(next_attempt_at__gt=now)
    return pending | Q(status=NoticeStatus.SENDING, claim_expires_at__lte=now)


def due_slot_ids(request_id: UUID, now: datetime) -> list[int]:
    return list(
        NoticeSlot.objects.filter(_due(now), request_id=request_id)
        .order_by("due_at", "id")
        .values_list("id", flat=True)
    )


def lock_due_slots(request: RetirementRequest, now: datetime) -> list[NoticeSlot]:
    """The request's due notices, locked; one another sender is saving now is skipped."""
    return list(
        NoticeSlot.objects.select_for_update(skip_locked=True)
        .filter(_due(now), request=request)
        .order_by("due_at", "id")
    )


# The watcher's common step in hand-written SQL: a waiting request, not yet eligible, woken for
# its notices. Anything else goes through the general step (the ORM path above and below).

_WAKE = """
    SELECT r.status, r.eligible_at, r.watcher_id, r.requested_at, u.username, u.email, w.slug, w.name
    FROM retirements_retirementrequest r
    JOIN retirements_workspace w ON w.id = r.workspace_id
    JOIN auth_user u ON u.id = r.requested_by_id
    WHERE r.id = %s FOR UPDATE OF w, r"""


@dataclass(frozen=True)
class Woken:
    """A request as the watcher's quick step locked it: what the boundary's first rules read,
    and what its notices name. Whether the quick step applies is the policy's call."""

    request_id: UUID
    status: str
    watcher_id: UUID | None
    eligible_at: datetime
    requested_at: datetime
    requester: str
    requester_email: str
    slug: str
    name: str


def lock_waiting(request_id: UUID, *, skip_locked: bool) -> Woken | str | None:
    """Lock workspace and request (inside atomic()) and read them; "busy" when skipped as
    locked by another transaction; None when there is no such request."""
    with connection.cursor() as cur:
        if not skip_locked:  # waiting for the locks: the workspace first, as every writer takes them
            cur.execute(
                "SELECT 1 FROM retirements_workspace WHERE id ="
                " (SELECT workspace_id FROM retirements_retirementrequest WHERE id = %s) FOR UPDATE",
                [request_id],
            )
        cur.execute(_WAKE + (" SKIP LOCKED" if skip_locked else ""), [request_id])  # skipping never waits
        row = cur.fetchone()
    if row is None:
        exists = RetirementRequest.objects.filter(id=request_id).exists()
        return "busy" if skip_locked and exists else None
    status, eligible_at, current_watcher, requested_at, username, email, slug, name = row
    return Woken(request_id, status, current_watcher, eligible_at, requested_at, username, email or "", slug, name)


def beat_quick(woken: Woken, watcher_id: UUID, now: datetime) -> bool:
    """The authoritative watcher beats (started once) and any stall alarm clears. False when
    the watcher is no longer active: the general step settles it."""
    running = fsm_target(RetirementWatcher.start, WatcherStatus.PENDING)
    with connection.cursor() as cur:
        cur.execute(  # one statement: the beat, and the stall alarm cleared when it beat
            "WITH beat AS (UPDATE retirements_retirementwatcher SET status = %s,"
            " started_at = COALESCE(started_at, %s), heartbeat_at = %s WHERE id = %s AND status IN (%s, %s)"
            " RETURNING id),"
            " cleared AS (UPDATE retirements_alarm SET resolved_at = %s WHERE request_id = %s"
            " AND kind = 'watcher_stalled' AND resolved_at IS NULL AND EXISTS (SELECT 1 FROM beat))"
            " SELECT count(*) FROM beat",
            [running, now, now, watcher_id, WatcherStatus.PENDING, WatcherStatus.RUNNING, now, woken.request_id],
        )
        return bool(cur.fetchone()[0])


def claim_due_quick(woken: Woken, now: datetime, *, claimer: str, until: datetime) -> list[tuple[int, str]]:
    """Claim the request's due notices (a slot another sender holds is skipped): (id, kind) of each."""
    with connection.cursor() as cur:
        cur.execute(  # sent in due order, as the general step sends them
            "WITH claimed AS (UPDATE retirements_noticeslot SET status = %s, claimed_by = %s, claim_expires_at = %s,"
            " attempts = attempts + 1 WHERE id IN ("
            " SELECT id FROM retirements_noticeslot WHERE request_id = %s AND ("
            " (status = %s AND due_at <= %s AND (next_attempt_at IS NULL OR next_attempt_at <= %s))"
            " OR (status = %s AND claim_expires_at <= %s)) FOR UPDATE SKIP LOCKED)"
            " RETURNING id, kind, due_at) SELECT id, kind FROM claimed ORDER BY due_at, id",
            [
                fsm_target(NoticeSlot.claim, NoticeStatus.PENDING),
                claimer,
                until,
                woken.request_id,
                NoticeStatus.PENDING,
                now,
                now,
                NoticeStatus.SENDING,
                now,
            ],
        )
        return cur.fetchall()


def record_and_wait(woken: Woken, delivered: list[int], *, claimer: str, now: datetime) -> str:
    """Save the delivered claims and the wait (not yet eligible) until the next thing to do,
    under the locks the caller took again (inside atomic())."""
    with connection.cursor() as cur:
        if delivered:
            cur.execute(
                "UPDATE retirements_noticeslot SET status = %s, delivered_at = %s, next_attempt_at = NULL,"
                " last_error = '', claimed_by = '', claim_expires_at = NULL"
                " WHERE id = ANY(%s) AND status = %s AND claimed_by = %s",
                [fsm_target(NoticeSlot.deliver, NoticeStatus.SENDING), now, delivered, NoticeStatus.SENDING, claimer],
            )
            if cur.rowcount != len(delivered):  # another sender took over an expired claim
                logger.warning("notice outcome for a lost claim request=%s", woken.request_id)
        cur.execute(
            "SELECT id, kind, due_at, status, next_attempt_at, claim_expires_at FROM retirements_noticeslot"
            " WHERE request_id = %s AND status IN (%s, %s)",
            [woken.request_id, NoticeStatus.PENDING, NoticeStatus.SENDING],
        )
        pending = [policy.SlotView(*row) for row in cur.fetchall()]
        wake = policy.next_wake(eligible_at=woken.eligible_at, pending=pending, blocked_until=None)
        cur.execute(
            "UPDATE retirements_retirementrequest SET next_wake_at = %s, blocker = '', blocked_until = NULL,"
            " updated_at = %s WHERE id = %s",
            [wake, now, woken.request_id],
        )
    return f"{policy.WAIT} until {wake.isoformat()}"


def due_slot_ids_after_ponr(now: datetime) -> list[int]:
    """Due notices of requests past the point of no return (destruction_started), even once purged."""
    return list(
        NoticeSlot.objects.filter(_due(now), request__status__in=[RequestStatus.EXECUTING, RequestStatus.COMPLETED])
        .order_by("due_at", "id")
        .values_list("id", flat=True)
    )


# Locks (inside atomic(); always workspace before request)


@overload
def lock_request(request_id: UUID | str) -> tuple[RetirementRequest, Workspace]: ...
@overload
def lock_request(request_id: UUID | str, *, skip_locked: bool) -> tuple[RetirementRequest, Workspace] | None: ...
def lock_request(request_id: UUID | str, *, skip_locked: bool = False) -> tuple[RetirementRequest, Workspace] | None:
    """Lock workspace, then request: the one lock order every writer follows. `skip_locked`:
    None at once when another transaction holds either (a watcher tick leaves it to that one)."""
    workspace_id = RetirementRequest.objects.filter(id=request_id).values_list("workspace_id", flat=True).first()
    if workspace_id is None:
        raise NotFound(f"no retirement request with id {request_id}")
    # By key, so no ORDER BY (first() would add one, and its compiling costs more than the lock).
    workspace = next(
        iter(Workspace.objects.select_for_update(skip_locked=skip_locked).filter(id=workspace_id)[:1]), None
    )
    request = next(
        iter(  # the request row only: its requester's user row is shared by many cases
            RetirementRequest.objects.select_for_update(skip_locked=skip_locked, of=("self",))
            .select_related("requested_by")
            .filter(id=request_id)[:1]
        ),
        None,
    )
    if workspace is None or request is None:
        if skip_locked:
            return None
        raise NotFound(f"no retirement request with id {request_id}")
    return request, workspace


def lock_workspace(slug: str) -> Workspace:
    workspace = Workspace.objects.select_for_update().filter(slug=slug).first()
    if workspace is None:
        raise NotFound(f"no workspace with slug {shown(slug)}")
    return workspace


def lock_watcher(watcher_id: UUID) -> RetirementWatcher:
    return lock_or_not_found(RetirementWatcher.objects.all(), watcher_id, "watcher")


def lock_current_watcher(request: RetirementRequest) -> RetirementWatcher | None:
    if request.watcher_id is None:
        return None
    return RetirementWatcher.objects.select_for_update().filter(id=request.watcher_id).first()


def lock_slot(slot_id: int) -> NoticeSlot:
    return (
        NoticeSlot.objects.select_for_update()
        .select_related("request__workspace", "request__requested_by")
        .get(id=slot_id)
    )


# The decision log and alarms


def log_decision(
    *,
    request: RetirementRequest | None,
    workspace: Workspace,
    actor: Actor | None,
    action: str,
    reason: str,
    now: datetime,
    system: str = "watcher",
    generation: int | None = None,
) -> Decision:
    """`actor` None: the system component `system` decided; `generation`: the lease it acted under."""
    return decisions.record(
        Decision,
        actor=actor,
        action=action,
        reason=reason,
        now=now,
        system=system,
        generation=generation,
        request=request,
        workspace=workspace,
    )


def raise_alarm(
    *, kind: str, request: RetirementRequest, message: str, now: datetime, slot: NoticeSlot | None = None
) -> Alarm | None:
    """Save an open alarm (one per kind, request and slot) and log it as an error."""
    logger.error("alarm kind=%s request=%s slot=%s", kind, request.id, slot.id if slot else None)  # ids only
    open_ = Alarm.objects.filter(kind=kind, request=request, slot=slot, resolved_at__isnull=True)
    existing = open_.first()
    if existing:
        return existing
    try:
        with transaction.atomic():
            return Alarm.objects.create(kind=kind, request=request, slot=slot, message=message, created_at=now)
    except IntegrityError:
        return open_.first()


def resolve_alarms(*, kind: str, request: RetirementRequest, now: datetime, slot_ids: Iterable[int] = ()) -> None:
    alarms = Alarm.objects.filter(kind=kind, request=request, resolved_at__isnull=True)
    slot_ids = list(slot_ids)
    if slot_ids:
        alarms = alarms.filter(slot_id__in=slot_ids)
    alarms.update(resolved_at=now)


# Staff decisions


def create_request(
    *,
    workspace: Workspace,
    actor: Actor,
    reason: str,
    confirmation: str,
    eligibility: policy.Eligibility,
    plan: Iterable[policy.PlannedNotice],
    now: datetime,
) -> tuple[RetirementRequest, RetirementWatcher]:
    """Request, notice slots, watcher and workspace deletion_pending, together."""
    request = RetirementRequest.objects.create(
        workspace=workspace,
        requested_by=actor.user,
        reason=reason,
        confirmation=confirmation,
        requested_at=now,
        eligible_at=eligibility.eligible_at,
        eligibility_policy=eligibility.policy,
        next_wake_at=now,
        owner=actor.user,
        last_action=f"requested by {actor.name}",
        updated_at=now,
    )
    _add_slots(request, plan)
    watcher = RetirementWatcher.objects.create(request=request, created_at=now)
    request.watcher = watcher
    request.save(update_fields=["watcher"])
    workspace.mark_deletion_pending()
    workspace.save(update_fields=["lifecycle"])
    log_decision(request=request, workspace=workspace, actor=actor, action="request", reason=reason, now=now)
    return request, watcher


def hold(
    request: RetirementRequest, workspace: Workspace, *, actor: Actor | None, reason: str, now: datetime, action: str
) -> None:
    """Held by a person, or by the watcher at the point of no return (`actor` None)."""
    request.hold()
    request.held_at, request.held_by, request.hold_reason = now, actor.user if actor else None, reason
    request.next_wake_at = None
    fields = ["status", "held_at", "held_by", "hold_reason", "next_wake_at", "last_action", "updated_at"]
    if actor is not None:
        request.owner = actor.user
        request.last_action = f"held by {actor.name}: {reason}"
        fields.append("owner")
    else:
        request.last_action = f"held at the point of no return: {reason}"
    request.updated_at = now
    request.save(update_fields=fields)
    log_decision(request=request, workspace=workspace, actor=actor, action=action, reason=reason, now=now)


def release(
    request: RetirementRequest, workspace: Workspace, *, actor: Actor, plan: policy.Replan, reason: str, now: datetime
) -> None:
    held_for = now - (request.held_at or now)
    for slot_id, due in plan.moved:
        NoticeSlot.objects.filter(id=slot_id).update(due_at=due, next_attempt_at=None)
    for slot in NoticeSlot.objects.select_for_update().filter(id__in=plan.suppressed):
        slot.suppress()
        slot.save(update_fields=["status"])
    _add_slots(request, plan.added)
    request.release()
    request.eligible_at = plan.eligible_at
    request.held_at, request.held_by = None, None
    request.blocker, request.blocked_until = "", None
    request.next_wake_at = policy.next_wake(
        eligible_at=plan.eligible_at, pending=slot_views(request, pending_only=True), blocked_until=None
    )
    request.last_action = f"released by {actor.name} after {held_for}; eligible at {plan.eligible_at}"
    request.updated_at = now
    request.save(
        update_fields=[
            "status",
            "eligible_at",
            "held_at",
            "held_by",
            "blocker",
            "blocked_until",
            "next_wake_at",
            "last_action",
            "updated_at",
        ]
    )
    log_decision(
        request=request,
        workspace=workspace,
        actor=actor,
        action="release",
        reason=reason or f"held for {held_for}; eligibility extended to {plan.eligible_at.isoformat()}",
        now=now,
    )


def cancel(request: RetirementRequest, workspace: Workspace, *, actor: Actor, reason: str, now: datetime) -> None:
    """The workspace returns to disabled, pending notices are suppressed, watchers settle."""
    request.cancel()
    request.cancelled_at, request.cancelled_by, request.cancel_reason = now, actor.user, reason
    request.next_wake_at = None
    request.concluded_at = now
    request.conclusion = f"cancelled by {actor.name}: {reason}"
    request.last_action = request.conclusion
    request.updated_at = now
    request.save(
        update_fields=[
            "status",
            "cancelled_at",
            "cancelled_by",
            "cancel_reason",
            "next_wake_at",
            "concluded_at",
            "conclusion",
            "last_action",
            "updated_at",
        ]
    )
    _restore_workspace(workspace)
    suppress_pending_notices(request)
    for watcher in RetirementWatcher.objects.select_for_update().filter(request=request, status__in=ACTIVE_WATCHER):
        settle_watcher(watcher, reason="request cancelled", now=now)
    log_decision(request=request, workspace=workspace, actor=actor, action="cancel", reason=reason, now=now)


def replace_watcher(
    request: RetirementRequest, workspace: Workspace, *, actor: Actor, old: RetirementWatcher | None, now: datetime
) -> RetirementWatcher:
    new = RetirementWatcher.objects.create(request=request, created_at=now, replaces=old)
    if old is not None and old.status in ACTIVE_WATCHER:
        settle_watcher(old, reason=f"superseded by {new.id} (resumed by {actor.name})", now=now, superseded=True)
    request.watcher = new
    if request.status == "waiting":
        request.next_wake_at = now
    request.last_action = f"watcher resumed by {actor.name}"
    request.updated_at = now
    request.save(update_fields=["watcher", "next_wake_at", "last_action", "updated_at"])
    resolve_alarms(kind="watcher_stalled", request=request, now=now)
    log_decision(
        request=request,
        workspace=workspace,
        actor=actor,
        action="resume",
        reason=f"watcher {new.id} replaces {old.id if old else 'none'}",
        now=now,
    )
    return new


# The watcher


def settle_watcher(watcher: RetirementWatcher, *, reason: str, now: datetime, superseded: bool = False) -> None:
    if superseded:
        watcher.supersede()
    else:
        watcher.settle()
    watcher.concluded_at = now
    watcher.conclusion = reason
    watcher.save(update_fields=["status", "concluded_at", "conclusion"])


def beat_watcher(watcher: RetirementWatcher, request: RetirementRequest, *, now: datetime) -> None:
    """The authoritative watcher wakes: started once, heartbeat now, any stall alarm cleared."""
    if watcher.status == WatcherStatus.PENDING:
        watcher.start()
        watcher.started_at = now
    watcher.heartbeat_at = now
    watcher.save(update_fields=["status", "started_at", "heartbeat_at"])
    if Alarm.objects.filter(kind="watcher_stalled", request=request, resolved_at__isnull=True).exists():
        resolve_alarms(kind="watcher_stalled", request=request, now=now)


def apply_verdict(
    verdict: policy.Verdict,
    request: RetirementRequest,
    workspace: Workspace,
    watcher: RetirementWatcher,
    *,
    now: datetime,
) -> PurgeJob | None:
    """Apply the point-of-no-return verdict under the locks the watcher holds; the purge job on PROCEED."""
    fields = ["next_wake_at", "last_action", "updated_at"]
    request.updated_at = now
    if verdict.action == policy.SUPERSEDED:
        settle_watcher(watcher, reason=verdict.reason, now=now, superseded=True)
    elif verdict.action == policy.CONCLUDE:
        settle_watcher(watcher, reason=verdict.reason, now=now)
    elif verdict.action == policy.SLEEP:
        request.next_wake_at = None
        request.save(update_fields=["next_wake_at"])
    elif verdict.action == policy.WAIT:
        blocked = verdict.reason != policy.NOT_YET_ELIGIBLE
        request.blocker = verdict.reason if blocked else ""
        request.blocked_until = verdict.wake_at if blocked else None
        request.next_wake_at = policy.next_wake(
            eligible_at=request.eligible_at,
            pending=slot_views(request, pending_only=True),
            blocked_until=request.blocked_until,
        )
        request.last_action = f"waiting: {verdict.reason}" if blocked else request.last_action
        request.save(update_fields=[*fields, "blocker", "blocked_until"])
        if blocked:
            log_decision(
                request=request, workspace=workspace, actor=None, action="boundary_wait", reason=verdict.reason, now=now
            )
    elif verdict.action == policy.HOLD:
        hold(request, workspace, actor=None, reason=verdict.reason, now=now, action="boundary_hold")
    elif verdict.action == policy.CLOSE:
        request.close()
        request.next_wake_at = None
        request.concluded_at, request.conclusion = now, f"closed without purge: {verdict.reason}"
        request.last_action = request.conclusion
        request.save(update_fields=[*fields, "status", "concluded_at", "conclusion"])
        _restore_workspace(workspace)
        suppress_pending_notices(request)
        settle_watcher(watcher, reason=request.conclusion, now=now)
        log_decision(
            request=request, workspace=workspace, actor=None, action="boundary_close", reason=verdict.reason, now=now
        )
    elif verdict.action == policy.PROCEED:
        return _begin_execution(request, workspace, watcher, now=now)
    else:
        raise ValueError(f"unknown verdict {verdict.action!r}")
    return None


def _begin_execution(
    request: RetirementRequest, workspace: Workspace, watcher: RetirementWatcher, *, now: datetime
) -> PurgeJob:
    """Every recheck passed: destructive state commits here, together."""
    job = PurgeJob.objects.create(request=request, created_at=now)
    request.begin_execution()
    request.next_wake_at = None
    request.blocker, request.blocked_until = "", None
    request.last_action = f"point of no return passed; purge job {job.operation_id}"
    request.save(update_fields=["next_wake_at", "last_action", "updated_at", "status", "blocker", "blocked_until"])
    workspace.begin_deleting()
    workspace.save(update_fields=["lifecycle"])
    NoticeSlot.objects.get_or_create(
        request=request, kind=policy.DESTRUCTION_STARTED, due_at=now, defaults={"gating": False}
    )
    settle_watcher(watcher, reason=f"destruction began: purge operation {job.operation_id}", now=now)
    log_decision(
        request=request,
        workspace=workspace,
        actor=None,
        action="point_of_no_return",
        reason=f"all rechecks passed; purge operation {job.operation_id}",
        now=now,
    )
    return job


# Notices


def suppress_pending_notices(request: RetirementRequest) -> int:
    slots = list(NoticeSlot.objects.select_for_update().filter(request=request, status=NoticeStatus.PENDING))
    for slot in slots:
        suppress_slot(slot)
    return len(slots)


def suppress_slot(slot: NoticeSlot) -> None:
    slot.suppress()
    slot.next_attempt_at = None
    slot.save(update_fields=["status", "next_attempt_at"])


def claim_slot(slot: NoticeSlot, *, claimer: str, until: datetime) -> None:
    """Claimed in its own transaction before the send: a concurrent watcher skips a live claim."""
    slot.claim()
    slot.claimed_by, slot.claim_expires_at = claimer, until
    slot.attempts += 1
    slot.save(update_fields=["status", "claimed_by", "claim_expires_at", "attempts"])


def _lock_claimed(slot_id: int, claimer: str) -> NoticeSlot | None:
    slot = NoticeSlot.objects.select_for_update().select_related("request").get(id=slot_id)
    if slot.status != NoticeStatus.SENDING or slot.claimed_by != claimer:
        logger.warning("notice outcome for a lost claim slot=%s", slot.id)  # another sender took over
        return None
    return slot


def record_delivered(slot_id: int, *, claimer: str, now: datetime) -> None:
    with transaction.atomic():
        slot = _lock_claimed(slot_id, claimer)
        if slot is None:
            return
        slot.deliver()
        slot.delivered_at, slot.next_attempt_at, slot.last_error = now, None, ""
        slot.claimed_by, slot.claim_expires_at = "", None
        slot.save(
            update_fields=["status", "delivered_at", "next_attempt_at", "last_error", "claimed_by", "claim_expires_at"]
        )


def record_notice_failure(slot_id: int, error: str, *, claimer: str, now: datetime) -> None:
    with transaction.atomic():
        slot = _lock_claimed(slot_id, claimer)
        if slot is None:
            return
        retry = policy.notice_retry(slot.attempts, now)
        if retry.exhausted:
            slot.give_up()
        else:
            slot.retry_later()
        slot.last_error = error
        slot.next_attempt_at = retry.next_attempt_at
        slot.claimed_by, slot.claim_expires_at = "", None
        slot.save(update_fields=["status", "last_error", "next_attempt_at", "claimed_by", "claim_expires_at"])
        logger.warning("notice failed slot=%s kind=%s attempt=%s", slot.id, slot.kind, slot.attempts)
        if retry.exhausted:
            raise_alarm(
                kind="notice_failed",
                request=slot.request,
                slot=slot,
                message=f"{slot.kind} notice failed {slot.attempts} times: {error}",
                now=now,
            )


def rearm_failed_notices(
    request: RetirementRequest, workspace: Workspace, *, actor: Actor, reason: str, now: datetime
) -> list[str]:
    """A staff decision: failed notices get a fresh attempt budget, due now."""
    slots = list(NoticeSlot.objects.select_for_update().filter(request=request, status=NoticeStatus.FAILED))
    for slot in slots:
        slot.rearm()
        slot.attempts, slot.next_attempt_at = 0, None
        slot.save(update_fields=["status", "attempts", "next_attempt_at"])
    resolve_alarms(kind="notice_failed", request=request, now=now, slot_ids=[s.id for s in slots])
    kinds = [s.kind for s in slots]
    if request.status == RequestStatus.WAITING:
        request.next_wake_at = now
    request.last_action = f"notices re-armed by {actor.name}: {', '.join(kinds)}"
    request.updated_at = now
    request.save(update_fields=["next_wake_at", "last_action", "updated_at"])
    log_decision(
        request=request,
        workspace=workspace,
        actor=actor,
        action="retry_notices",
        reason=f"{', '.join(kinds)}: {reason}",
        now=now,
    )
    return kinds


def _add_slots(request: RetirementRequest, plan: Iterable[policy.PlannedNotice]) -> None:
    NoticeSlot.objects.bulk_create(
        NoticeSlot(request=request, kind=p.kind, due_at=p.due_at, gating=p.gating) for p in plan
    )


def _restore_workspace(workspace: Workspace) -> None:
    if workspace.lifecycle == Lifecycle.DELETION_PENDING:
        workspace.restore_disabled()
        workspace.save(update_fields=["lifecycle"])


# The purge


def claim_purge(job_id: int, *, owner: str, now: datetime, lease_seconds: int) -> int | None:
    """Take the purge job's lease with a new generation (a conditional update); None when held or done."""
    free = Q(lease_owner__isnull=True) | Q(lease_expires_at__lte=now)
    claimed = PurgeJob.objects.filter(free, id=job_id, status=PurgeStatus.QUEUED).update(
        lease_owner=owner,
        lease_generation=F("lease_generation") + 1,
        lease_expires_at=now + timedelta(seconds=lease_seconds),
    )
    if not claimed:
        return None
    return PurgeJob.objects.values_list("lease_generation", flat=True).get(id=job_id)


def lock_purge(job_id: int) -> tuple[RetirementRequest, Workspace, PurgeJob] | None:
    request_id = PurgeJob.objects.filter(id=job_id).values_list("request_id", flat=True).first()
    if request_id is None:
        return None
    request, workspace = lock_request(request_id)
    return request, workspace, PurgeJob.objects.select_for_update().get(id=job_id)


def purge_facts(
    request: RetirementRequest, job: PurgeJob, *, owner: str, generation: int, operation_id: UUID, now: datetime
) -> policy.PurgeFacts:
    requester = type(request.requested_by).objects.get(pk=request.requested_by_id)  # fresh: active flag, groups
    return policy.PurgeFacts(
        job_status=job.status,
        holder=job.lease_owner or "",
        holder_generation=job.lease_generation,
        owner=owner,
        generation=generation,
        job_operation_id=job.operation_id,
        operation_id=operation_id,
        request_status=request.status,
        requester=requester.get_username(),
        requester_may=authority.may(requester, "retirements.request_retirement"),
    )


def apply_purge(
    request: RetirementRequest, workspace: Workspace, job: PurgeJob, *, generation: int, now: datetime
) -> None:
    workspace.mark_deleted()
    workspace.save(update_fields=["lifecycle"])
    job.finish()
    job.finished_at = now
    job.lease_owner, job.lease_expires_at = None, None
    job.save(update_fields=["status", "finished_at", "lease_owner", "lease_expires_at"])
    request.complete()
    request.concluded_at = now
    request.conclusion = f"workspace deleted by purge operation {job.operation_id}"
    request.last_action = request.conclusion
    request.updated_at = now
    request.save(update_fields=["status", "concluded_at", "conclusion", "last_action", "updated_at"])
    _log_purge(request, workspace, "purged", f"operation {job.operation_id}", generation, now)


def refuse_purge(
    request: RetirementRequest, workspace: Workspace, job: PurgeJob, *, rule: str, generation: int, now: datetime
) -> None:
    """The receiving boundary refused for want of authority: nothing purged, a person must look."""
    job.refuse()
    job.refusal = rule
    job.lease_owner, job.lease_expires_at = None, None
    job.save(update_fields=["status", "refusal", "lease_owner", "lease_expires_at"])
    request.last_action = f"purge refused at the receiving boundary: {rule}"
    request.updated_at = now
    request.save(update_fields=["last_action", "updated_at"])
    raise_alarm(kind="purge_refused", request=request, message=rule, now=now)
    _log_purge(request, workspace, "purge_refused", rule, generation, now)


def log_stale_purge(
    request: RetirementRequest, workspace: Workspace, *, rule: str, generation: int, now: datetime
) -> None:
    _log_purge(request, workspace, "purge_rejected", rule, generation, now)


def _log_purge(
    request: RetirementRequest, workspace: Workspace, action: str, reason: str, generation: int, now: datetime
) -> None:
    log_decision(
        request=request,
        workspace=workspace,
        actor=None,
        action=action,
        reason=reason,
        now=now,
        system="purge",
        generation=generation,
    )


# As plain data, for commands and scripts


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def summary(request_id: UUID, *keys: str) -> dict[str, Any]:
    """The named fields of a freshly read request, as `describe` spells them."""
    data = describe(get(request_id))
    return {k: data[k] for k in keys}


def describe(request: RetirementRequest) -> dict[str, Any]:
    ws = request.workspace
    job = getattr(request, "purge_job", None)
    return {
        "id": str(request.id),
        "status": request.status,
        "workspace": {"slug": ws.slug, "lifecycle": ws.lifecycle, "legal_hold": ws.legal_hold},
        "requested_by": request.requested_by.get_username(),
        "reason": request.reason,
        "requested_at": _iso(request.requested_at),
        "eligibility_policy": request.eligibility_policy,
        "eligible_at": _iso(request.eligible_at),
        "next_wake_at": _iso(request.next_wake_at),
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
