"""The watcher step's writes: the beat, the wait, and the point-of-no-return verdicts applied."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.db import connection

from core.sql import Statements
from retirements.contract import (
    CLOSE,
    CONCLUDE,
    DESTRUCTION_STARTED,
    HOLD,
    PROCEED,
    SLEEP,
    SUPERSEDED,
    WAIT,
    Verdict,
)
from retirements.models import NoticeSlot, PurgeJob, RetirementRequest, RetirementWatcher, Workspace
from retirements.store.decisions import log_decision
from retirements.store.notices import suppress_pending_notices
from retirements.store.requests import hold, restore_workspace, settle_watcher

SQL = Statements.beside(__file__, "steps.sql")


def beat(watcher_id: UUID, request_id: UUID, *, now: datetime) -> bool:
    """The authoritative watcher beats (started once) and any stall alarm clears. False when the
    watcher is no longer active (nothing written)."""
    with connection.cursor() as cur:
        return SQL.one(cur, "beat", watcher_id=watcher_id, request_id=request_id, now=now) is not None


def wait(request_id: UUID, *, wake: datetime, verdict: Verdict, now: datetime) -> None:
    """A waiting request sleeps until `wake` (decided by the policy), showing the verdict's
    blocker while it has one; inside the transaction that holds the request's lock."""
    blocked = bool(verdict.blocker)
    with connection.cursor() as cur:
        saved = SQL.run(
            cur,
            "wait",
            request_id=request_id,
            wake=wake,
            blocker=verdict.blocker,
            blocked_until=verdict.wake_at if blocked else None,
            action=f"waiting: {verdict.blocker}" if blocked else None,
            now=now,
        )
    if saved != 1:
        raise ValueError(f"request {request_id} is not waiting: it cannot wait until {wake.isoformat()}")


def apply_verdict(
    verdict: Verdict,
    request: RetirementRequest,
    workspace: Workspace,
    watcher: RetirementWatcher,
    *,
    wake: datetime | None,
    now: datetime,
) -> PurgeJob | None:
    """Apply the point-of-no-return verdict under the locks the watcher holds (`wake`: when a
    WAIT wakes again); the purge job on PROCEED."""
    fields = ["next_wake_at", "last_action", "updated_at"]
    request.updated_at = now
    if verdict.action == SUPERSEDED:
        settle_watcher(watcher, reason=verdict.reason, now=now, superseded=True)
    elif verdict.action == CONCLUDE:
        settle_watcher(watcher, reason=verdict.reason, now=now)
    elif verdict.action == SLEEP:
        request.next_wake_at = None
        request.save(update_fields=["next_wake_at"])
    elif verdict.action == WAIT:
        if wake is None:
            raise ValueError("a WAIT verdict needs the time to wake again")
        wait(request.id, wake=wake, verdict=verdict, now=now)
        if verdict.blocker:
            log_decision(
                request=request, workspace=workspace, actor=None, action="boundary_wait", reason=verdict.reason, now=now
            )
    elif verdict.action == HOLD:
        hold(request, workspace, actor=None, reason=verdict.reason, now=now, action="boundary_hold")
    elif verdict.action == CLOSE:
        request.close()
        request.next_wake_at = None
        request.concluded_at, request.conclusion = now, f"closed without purge: {verdict.reason}"
        request.last_action = request.conclusion
        request.save(update_fields=[*fields, "status", "concluded_at", "conclusion"])
        restore_workspace(workspace)
        suppress_pending_notices(request)
        settle_watcher(watcher, reason=request.conclusion, now=now)
        log_decision(
            request=request, workspace=workspace, actor=None, action="boundary_close", reason=verdict.reason, now=now
        )
    elif verdict.action == PROCEED:
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
    NoticeSlot.objects.get_or_create(request=request, kind=DESTRUCTION_STARTED, due_at=now, defaults={"gating": False})
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
