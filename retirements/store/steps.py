"""The watcher step's writes: the beat, the wait, and the point-of-no-return verdicts applied."""

from __future__ import annotations

import uuid
from datetime import datetime
from uuid import UUID

from django.db import connection

from core.sql import Statements
from retirements.contract import (
    CLOSE,
    CONCLUDE,
    HOLD,
    PROCEED,
    SLEEP,
    SUPERSEDED,
    WAIT,
    Verdict,
)
from retirements.models import RetirementRequest, RetirementWatcher, Workspace
from retirements.store.decisions import log_decision
from retirements.store.requests import end_without_purge, hold, settle_watcher

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


def move_eligibility(request_id: UUID, *, eligible_at: datetime, reason: str, now: datetime) -> None:
    """Eligibility moves later (never earlier) and the move is logged, under the step's locks."""
    with connection.cursor() as cur:
        moved = SQL.one(cur, "move_eligibility", request_id=request_id, eligible_at=eligible_at, now=now,
                        action=f"eligibility moved: {reason}")  # fmt: skip
    if moved is not None:
        request = RetirementRequest.objects.get(id=request_id)
        workspace = Workspace.objects.get(id=moved[0])
        log_decision(request=request, workspace=workspace, actor=None, action="eligibility_moved", reason=reason,
                     now=now)  # fmt: skip


def apply_verdict(
    verdict: Verdict,
    request: RetirementRequest,
    workspace: Workspace,
    watcher: RetirementWatcher,
    *,
    wake: datetime | None,
    now: datetime,
) -> int | None:
    """Apply the point-of-no-return verdict under the locks the watcher holds (`wake`: when a
    WAIT wakes again); the purge job's id on PROCEED."""
    if verdict.action == SUPERSEDED:
        settle_watcher(watcher, reason=verdict.reason, now=now, superseded=True)
    elif verdict.action == CONCLUDE:
        settle_watcher(watcher, reason=verdict.reason, now=now)
    elif verdict.action == SLEEP:
        with connection.cursor() as cur:
            SQL.one(cur, "sleep", request_id=request.id)
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
        conclusion = f"closed without purge: {verdict.reason}"
        end_without_purge(
            request, status="closed", sources=["waiting"], conclusion=conclusion, settled=conclusion, now=now
        )
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
) -> int:
    """Every recheck passed: destructive state commits here, together (one statement)."""
    operation_id = uuid.uuid4()
    with connection.cursor() as cur:
        job = SQL.one(
            cur,
            "begin_execution",
            request_id=request.id,
            watcher_id=watcher.id,
            operation_id=operation_id,
            action=f"point of no return passed; purge job {operation_id}",
            settled=f"destruction began: purge operation {operation_id}",
            now=now,
        )
    if job is None:
        raise ValueError(f"request {request.id} is not waiting for watcher {watcher.id}: nothing began")
    log_decision(
        request=request,
        workspace=workspace,
        actor=None,
        action="point_of_no_return",
        reason=f"all rechecks passed; purge operation {operation_id}",
        now=now,
    )
    return int(job[0])
