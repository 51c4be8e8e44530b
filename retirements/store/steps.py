"""The watcher step's writes: the beat, the wait, and the point-of-no-return verdicts applied."""

from __future__ import annotations

import uuid
from datetime import datetime
from uuid import UUID

from django.db import connection

from core.sql import Statements
from retirements.contract import (
    BOUNDARY_HOLD_ALARM,
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
from retirements.store.decisions import log_decision, raise_alarm
from retirements.store.requests import end_without_purge, hold, settle_watcher

SQL = Statements.beside(__file__, "steps.sql")


def beat(pairs: list[tuple[UUID, UUID]], *, now: datetime) -> set[UUID]:
    """The authoritative watchers beat (each started once) and their stall alarms clear; pairs
    of (watcher, request). Returns the watchers that beat: one missing is no longer active
    (nothing written for it)."""
    with connection.cursor() as cur:
        cur.execute(
            SQL.sql("beat"),
            {"watcher_ids": [w for w, _ in pairs], "request_ids": [r for _, r in pairs], "now": now},
        )
        return {row[0] for row in cur.fetchall()}


def wait(waits: list[tuple[UUID, datetime, Verdict]], *, now: datetime) -> None:
    """Waiting requests sleep, each until its wake (decided by the policy), showing its verdict's
    blocker while it has one; one statement inside the transaction that holds their locks."""
    if not waits:
        return
    with connection.cursor() as cur:
        cur.execute(
            SQL.sql("wait"),
            {
                "request_ids": [r for r, _, _ in waits],
                "wakes": [wake for _, wake, _ in waits],
                "blockers": [v.blocker for _, _, v in waits],
                "blocked_untils": [v.wake_at if v.blocker else None for _, _, v in waits],
                "actions": [f"waiting: {v.blocker}" if v.blocker else None for _, _, v in waits],
                "now": now,
            },
        )
        saved = {row[0] for row in cur.fetchall()}
    missed = [str(r) for r, _, _ in waits if r not in saved]
    if missed:
        raise ValueError(f"request(s) {', '.join(missed)} not waiting: they cannot wait")


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
        wait([(request.id, wake, verdict)], now=now)
        if verdict.blocker:
            log_decision(
                request=request, workspace=workspace, actor=None, action="boundary_wait", reason=verdict.reason, now=now
            )
    elif verdict.action == HOLD:
        hold(request, workspace, actor=None, reason=verdict.reason, now=now, action="boundary_hold")
        # The person on call now holds it: an alarm tells them (and the backup) by name.
        raise_alarm(
            kind=BOUNDARY_HOLD_ALARM,
            request=request,
            message=f"held at the point of no return: {verdict.reason}; release or cancel it",
            now=now,
        )
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
