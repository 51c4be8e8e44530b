"""The watcher's steps (hops 3, 4, 6, 7), run as django-q2 tasks at durable wake times.

No process sleeps through a wait: each step saves `next_wake_at` and returns;
the periodic `run_due` schedule runs whatever is due. Every step re-checks its
preconditions under the workspace and request locks.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import Q

from retirements import notices, policy, tasks
from retirements.models import (
    Lifecycle,
    NoticeSlot,
    NoticeStatus,
    PurgeJob,
    PurgeStatus,
    RequestStatus,
    RetirementRequest,
    RetirementWatcher,
    WatcherStatus,
)
from retirements.purge import run_purge
from retirements.records import (
    lock_request,
    log_decision,
    raise_alarm,
    resolve_alarms,
    settle_watcher,
    slot_views,
    suppress_pending_notices,
)

logger = logging.getLogger("retirements")
ACTIVE_WATCHER = (WatcherStatus.PENDING, WatcherStatus.RUNNING)


def step(watcher_id: UUID, *, now: datetime) -> str:
    request_id = RetirementWatcher.objects.filter(id=watcher_id).values_list("request_id", flat=True).first()
    if request_id is None:
        return f"no watcher {watcher_id}"
    with transaction.atomic():
        request, _ = lock_request(request_id)
        watcher = RetirementWatcher.objects.select_for_update().get(id=watcher_id)
        if watcher.status not in ACTIVE_WATCHER:
            return f"watcher {watcher.status}"
        if request.watcher_id != watcher.id:
            settle_watcher(watcher, reason="superseded watcher woke; no action taken", now=now, superseded=True)
            return "superseded"
        if watcher.status == WatcherStatus.PENDING:
            watcher.status, watcher.started_at = WatcherStatus.RUNNING, now
        watcher.heartbeat_at = now
        watcher.save(update_fields=["status", "started_at", "heartbeat_at"])
        resolve_alarms(kind="watcher_stalled", request=request, now=now)
        status = request.status
    if status == RequestStatus.WAITING:
        for slot_id in notices.due_slot_ids(request_id, now):
            notices.deliver(slot_id, now=now)
    return boundary(watcher_id, now=now)


def boundary(watcher_id: UUID, *, now: datetime) -> str:
    """Hop 4 (wait) or hop 6 (point of no return), then hop 7 (conclude) when done."""
    request_id = RetirementWatcher.objects.values_list("request_id", flat=True).get(id=watcher_id)
    with transaction.atomic():
        request, workspace = lock_request(request_id)
        watcher = RetirementWatcher.objects.select_for_update().get(id=watcher_id)
        if watcher.status not in ACTIVE_WATCHER:
            return f"watcher {watcher.status}"
        requester = request.requested_by
        undelivered = tuple(
            NoticeSlot.objects.filter(request=request, gating=True)
            .exclude(status=NoticeStatus.DELIVERED)
            .exclude(status=NoticeStatus.SUPPRESSED)
            .values_list("kind", flat=True)
        )
        verdict = policy.point_of_no_return(
            policy.BoundaryFacts(
                now=now,
                request_status=request.status,
                eligible_at=request.eligible_at,
                watcher_is_authoritative=request.watcher_id == watcher.id,
                workspace_lifecycle=workspace.lifecycle,
                legal_hold=workspace.legal_hold,
                protected_reason=workspace.protected_reason,
                undelivered_gating=undelivered,
                requester=requester.get_username(),
                requester_active=requester.is_active,
                requester_staff=requester.is_staff,
                requester_permitted=requester.is_active and requester.has_perm("retirements.request_retirement"),
            )
        )
        fields = ["next_wake_at", "last_action", "updated_at"]
        request.updated_at = now
        if verdict.action == policy.SUPERSEDED:
            settle_watcher(watcher, reason=verdict.reason, now=now, superseded=True)
            return verdict.action
        if verdict.action == policy.CONCLUDE:
            settle_watcher(watcher, reason=verdict.reason, now=now)
            return verdict.action
        if verdict.action == policy.SLEEP:
            request.next_wake_at = None
            request.save(update_fields=["next_wake_at"])
            return verdict.action
        if verdict.action == policy.WAIT:
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
                    request=request,
                    workspace=workspace,
                    actor=None,
                    action="boundary_wait",
                    reason=verdict.reason,
                    now=now,
                )
            return f"{verdict.action} until {request.next_wake_at.isoformat()}"
        if verdict.action == policy.HOLD:
            request.hold()
            request.held_at, request.held_by, request.hold_reason = now, None, verdict.reason
            request.next_wake_at = None
            request.last_action = f"held at the point of no return: {verdict.reason}"
            request.save(update_fields=[*fields, "status", "held_at", "held_by", "hold_reason"])
            log_decision(
                request=request, workspace=workspace, actor=None, action="boundary_hold", reason=verdict.reason, now=now
            )
            return verdict.action
        if verdict.action == policy.CLOSE:
            request.close()
            request.next_wake_at = None
            request.concluded_at, request.conclusion = now, f"closed without purge: {verdict.reason}"
            request.last_action = request.conclusion
            request.save(update_fields=[*fields, "status", "concluded_at", "conclusion"])
            if workspace.lifecycle == Lifecycle.DELETION_PENDING:
                workspace.restore_disabled()
                workspace.save(update_fields=["lifecycle"])
            suppress_pending_notices(request)
            settle_watcher(watcher, reason=request.conclusion, now=now)
            log_decision(
                request=request,
                workspace=workspace,
                actor=None,
                action="boundary_close",
                reason=verdict.reason,
                now=now,
            )
            return verdict.action
        # PROCEED: every recheck passed; destructive state commits here, together.
        job = PurgeJob.objects.create(request=request, created_at=now)
        request.begin_execution()
        request.next_wake_at = None
        request.blocker, request.blocked_until = "", None
        request.last_action = f"point of no return passed; purge job {job.operation_id}"
        request.save(update_fields=[*fields, "status", "blocker", "blocked_until"])
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
        transaction.on_commit(lambda: tasks.enqueue_purge(job.id))
        return verdict.action


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
        now=now,
    )


def detect_stalls(*, now: datetime) -> list[tuple[RetirementRequest, str]]:
    """Waiting requests whose watcher never started or missed its wake-up by 15 minutes."""
    stalled = []
    cutoff = now - policy.STALL_GRACE
    # The database narrows to candidates; the pure policy says why each one is stalled.
    candidates = (
        RetirementRequest.objects.filter(status=RequestStatus.WAITING)
        .filter(
            Q(watcher__isnull=True)
            | Q(next_wake_at__lt=cutoff)
            | Q(watcher__started_at__isnull=True, watcher__created_at__lt=cutoff)
        )
        .select_related("watcher", "workspace")
    )
    for request in candidates:
        why = stall_reason(request, now)
        if why:
            stalled.append((request, why))
    return stalled


def run_due(*, now: datetime) -> dict[str, Any]:
    """Run every due watcher step, deliver due notices of executing requests, run queued purges,
    then record alarms for stalled watchers. The django-q2 schedule and `run_watchers` call this."""
    summary: dict[str, Any] = {"steps": {}, "notices": 0, "purges": [], "stalled": []}
    due = RetirementRequest.objects.filter(
        status=RequestStatus.WAITING, next_wake_at__lte=now, watcher__status__in=ACTIVE_WATCHER
    ).values_list("id", "watcher_id")
    for request_id, watcher_id in due:
        try:
            summary["steps"][str(request_id)] = step(watcher_id, now=now)
        except Exception:
            logger.exception("watcher step failed request=%s watcher=%s", request_id, watcher_id)
            summary["steps"][str(request_id)] = "error"
    executing = RetirementRequest.objects.filter(status=RequestStatus.EXECUTING).values_list("id", flat=True)
    for request_id in executing:
        for slot_id in notices.due_slot_ids(request_id, now):
            summary["notices"] += notices.deliver(slot_id, now=now) == "delivered"
    for job_id in PurgeJob.objects.filter(status=PurgeStatus.QUEUED).values_list("id", flat=True):
        summary["purges"].append(run_purge(job_id, now=now))
    for request, why in detect_stalls(now=now):
        raise_alarm(kind="watcher_stalled", request=request, message=why, now=now)
        summary["stalled"].append({"request": str(request.id), "why": why})
    return summary
