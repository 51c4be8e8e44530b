"""The watcher's steps (hops 3, 4, 6, 7), run as django-q2 tasks at durable wake times.

No process sleeps through a wait: each step saves `next_wake_at` and returns;
the periodic `run_due` schedule runs whatever is due. The watcher reads what is
due, re-checks it under the workspace and request locks, asks the pure policy,
and tells the store to apply the verdict.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import Q

from core.crashpoints import crash_point
from retirements import notices, policy, store, tasks
from retirements.models import PurgeJob, PurgeStatus, RequestStatus, RetirementRequest, RetirementWatcher
from retirements.purge import run_purge
from retirements.store import ACTIVE_WATCHER

logger = logging.getLogger("retirements")


def step(watcher_id: UUID, *, now: datetime) -> str:
    request_id = RetirementWatcher.objects.filter(id=watcher_id).values_list("request_id", flat=True).first()
    if request_id is None:
        return f"no watcher {watcher_id}"
    with transaction.atomic():
        request, _ = store.lock_request(request_id)
        watcher = store.lock_watcher(watcher_id)
        if watcher.status not in ACTIVE_WATCHER:
            return f"watcher {watcher.status}"
        if request.watcher_id != watcher.id:
            store.settle_watcher(watcher, reason="superseded watcher woke; no action taken", now=now, superseded=True)
            return "superseded"
        store.beat_watcher(watcher, request, now=now)
        status = request.status
    crash_point("watcher-woke")
    if status == RequestStatus.WAITING:
        for slot_id in store.due_slot_ids(request_id, now):
            notices.deliver(slot_id, now=now)
    return boundary(watcher_id, now=now)


def boundary(watcher_id: UUID, *, now: datetime) -> str:
    """Hop 4 (wait) or hop 6 (point of no return), then hop 7 (conclude) when done."""
    request_id = RetirementWatcher.objects.values_list("request_id", flat=True).get(id=watcher_id)
    with transaction.atomic():
        request, workspace = store.lock_request(request_id)
        watcher = store.lock_watcher(watcher_id)
        if watcher.status not in ACTIVE_WATCHER:
            return f"watcher {watcher.status}"
        requester = request.requested_by
        verdict = policy.point_of_no_return(
            policy.BoundaryFacts(
                now=now,
                request_status=request.status,
                eligible_at=request.eligible_at,
                watcher_is_authoritative=request.watcher_id == watcher.id,
                workspace_lifecycle=workspace.lifecycle,
                legal_hold=workspace.legal_hold,
                protected_reason=workspace.protected_reason,
                undelivered_gating=store.undelivered_gating(request),
                requester=requester.get_username(),
                requester_active=requester.is_active,
                requester_staff=requester.is_staff,
                requester_permitted=requester.is_active and requester.has_perm("retirements.request_retirement"),
            )
        )
        job = store.apply_verdict(verdict, request, workspace, watcher, now=now)
        if job is not None:
            job_id = job.id
            transaction.on_commit(lambda: tasks.enqueue_purge(job_id))
        if verdict.action == policy.WAIT:
            assert request.next_wake_at is not None
            return f"{verdict.action} until {request.next_wake_at.isoformat()}"
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
    """Run every due watcher step, run queued purges, deliver due notices past the point of no
    return (even when the purge finished first), then record alarms for stalled watchers.
    The django-q2 schedule and `run_watchers` call this."""
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
    for job_id in PurgeJob.objects.filter(status=PurgeStatus.QUEUED).values_list("id", flat=True):
        summary["purges"].append(run_purge(job_id, now=now))
    for slot_id in store.due_slot_ids_after_ponr(now):
        summary["notices"] += notices.deliver(slot_id, now=now) == "delivered"
    for request, why in detect_stalls(now=now):
        store.raise_alarm(kind="watcher_stalled", request=request, message=why, now=now)
        summary["stalled"].append({"request": str(request.id), "why": why})
    return summary
