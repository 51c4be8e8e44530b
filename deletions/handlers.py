"""Dummy actions on real rows: save start, result or failure through the store.

Each action computes its outcome, submits it to the demo target system under
the row's operation id and the lease's fencing token, then saves what the
target system recorded (its first outcome when the operation was already
applied by an earlier attempt).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from core import clock
from core.crashpoints import crash_point
from core.logs import event
from deletions import receiver, retry, target_system
from deletions.contract import Lease, StageSnapshot
from deletions.errors import Interrupted, StaleLease
from deletions.rules import custody
from deletions.rules.workflow import GATE_USER, PURGE_AGENTS, PURGE_DB, Plan
from deletions.store import stages

logger = logging.getLogger("deletions")


@dataclass(frozen=True)
class RunOptions:
    no_agents_in: frozenset[str] = frozenset()
    fail_stage: str | None = None
    stage_delay_ms: int = 0


@dataclass(frozen=True)
class HandlerContext:
    lease: Lease
    options: RunOptions
    plan: Plan  # the approved inventory's communities, read once per run
    stop: threading.Event = field(default_factory=threading.Event)


def _outcome(ctx: HandlerContext, row: StageSnapshot) -> dict[str, Any]:
    if row.stage == GATE_USER:
        return {"gated": True, "target": row.inputs["target"]}
    if row.stage == PURGE_DB:
        return {"purged_rows": 0, "has_agents": row.community_id not in ctx.options.no_agents_in}
    if row.stage == PURGE_AGENTS:
        return {"agents_removed": 0}
    raise ValueError(f"no handler for stage {row.stage!r}")


def run_handler(ctx: HandlerContext, row: StageSnapshot) -> StageSnapshot | None:
    """Run one stage: the running mark, the effect at the receiver, and its outcome saved through
    the store. Returns the row as saved when it completed, else None (a saved failure, a refusal
    at the receiver, an effect still unknown); what runs next is the transition's to say
    (`transition.next_stage`)."""
    waits = bool(ctx.options.stage_delay_ms) or ctx.options.fail_stage == row.stage or ctx.stop.is_set()
    row, submitted_before = stages.begin(ctx.lease, row, now=clock.now(), submit=not waits)
    if submitted_before:
        return settle_unknown_effect(ctx, row)
    try:
        if row.submitted_at is None:  # something to wait for before the effect is submitted
            if ctx.options.fail_stage == row.stage:
                raise RuntimeError(f"injected failure in {row.stage} (--fail-stage)")
            if ctx.options.stage_delay_ms and ctx.stop.wait(ctx.options.stage_delay_ms / 1000):
                raise Interrupted(f"stopped during {row.stage}; the row stays current")
            if ctx.stop.is_set():
                raise Interrupted(f"stopped before {row.stage}; the row stays current")
            row = stages.submit(ctx.lease, row.id, now=clock.now())
        crash_point("after-submit-mark")
        applied = receiver.apply_effect(ctx.lease, row, outcome=_outcome(ctx, row), now=clock.now())
    except receiver.AuthorityRefused as refused:
        # Nothing was applied, and it is no failure: the case goes back to review.
        stages.set_aside(
            ctx.lease,
            row.id,
            refused.refusal.rule,
            review=refused.refusal.review,
            custody=custody.refused_at_boundary(rule=refused.refusal.rule, now=clock.now()),
            approval_id=refused.approval_id,
            now=clock.now(),
        )
        return None
    except (Interrupted, StaleLease):
        raise
    except Exception as exc:
        _fail(ctx, row, f"{type(exc).__name__}: {exc}")
        return None
    crash_point("after-effect")
    return _save(ctx, row, applied)


def _save(ctx: HandlerContext, row: StageSnapshot, recorded: dict[str, Any]) -> StageSnapshot:
    saved = stages.save_result(ctx.lease, row.id, recorded, now=clock.now())
    crash_point("after-success-saved")  # completed + current: the transition is still to come
    return saved


def _fail(ctx: HandlerContext, row: StageSnapshot, error: str, open_question: str = "") -> None:
    now = clock.now()
    stages.fail(
        ctx.lease,
        row.id,
        error,
        now=now,
        plan=lambda failures, owner: retry.plan_failure(
            failures=failures, owner=owner, stage=row.stage, error=error, open_question=open_question, now=now
        ),
    )


def settle_unknown_effect(ctx: HandlerContext, row: StageSnapshot) -> StageSnapshot | None:
    """An earlier attempt may have submitted: look the operation up, never resend blindly.

    Found: save what the target system recorded. Not found: the target may lag, so
    the effect stays unknown with an owner and a next check; only an operator who
    confirms it was not applied (`resume_deletion --effect-not-applied`) allows a resend.
    """
    event(
        logger,
        "lookup",
        request_id=ctx.lease.request_id,
        stage_id=row.id,
        stage=row.stage,
        executor=ctx.lease.owner,
        generation=ctx.lease.generation,
        reason=f"operation {row.operation_id} submitted at {row.submitted_at}; checking the target system",
    )
    try:
        recorded = target_system.lookup(row.operation_id, now=clock.now())
    except target_system.SourceUnavailable as exc:
        found = f"the target system could not be read ({exc.message})"
    else:
        if recorded is not None:
            return _save(ctx, row, recorded)
        found = "the target system has no record of it yet (it may lag)"
    _fail(
        ctx,
        row,
        f"effect unknown: operation {row.operation_id} was submitted at {row.submitted_at} but {found}; not resent",
        open_question=f"did operation {row.operation_id} ({row.stage}) take effect? the next check looks it up again",
    )
    return None
