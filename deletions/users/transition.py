"""UserDeletionTransition.get_next_stage: recover or choose the next saved position."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from core.crashpoints import crash_point
from deletions.errors import WorkflowError
from deletions.store import stages
from deletions.store.types import (
    Advance,
    AlreadyFinished,
    Initialize,
    Lease,
    NextStage,
    Operation,
    RequestSnapshot,
    Resume,
    StageSnapshot,
    WaitUntil,
)
from deletions.users import workflow


def decide(
    request: RequestSnapshot, history: list[StageSnapshot], now: datetime, previous_stage_id: UUID | None = None
) -> Operation:
    """Pure: the operation that moves this request on from its saved history."""
    if previous_stage_id is not None and previous_stage_id not in {s.id for s in history}:
        raise WorkflowError(f"stage {previous_stage_id} does not belong to request {request.id}")
    if request.status == "completed":
        return AlreadyFinished()
    progress = workflow.reconstruct(history, request.inventory, request.inventory_version)
    current = progress.current
    if current is None:
        return Initialize(workflow.initial_stage(request.inventory))
    if current.status == "completed":
        chosen, nxt = workflow.advance(
            current.stage, current.community_id, current.result, workflow.Plan.of(request.inventory)
        )
        return Advance(completed_stage_id=current.id, decision=chosen, successor=nxt)
    if current.status == "failed" and request.next_attempt_at is not None and request.next_attempt_at > now:
        return WaitUntil(request.next_attempt_at)
    return Resume(current.id)


def start(lease: Lease, status: str, inventory: dict[str, Any], version: int, *, now: datetime) -> NextStage:
    """The run's first position: an approved request with no history is initialized in one
    short transaction (after the same inventory checks a replay makes); anything else (a saved
    history to resume) goes through `get_next_stage`."""
    if status == "approved":
        workflow.reconstruct([], inventory, version)  # refuses an inventory rules v1 cannot run
        first = stages.initialize(lease, workflow.initial_stage(inventory), now=now)
        if first is not None:
            return first
    return get_next_stage(lease, None, now=now)


def complete_stage(
    lease: Lease, row: StageSnapshot, result: dict[str, Any], plan: workflow.Plan, *, now: datetime
) -> NextStage:
    """Save a stage's result and move on, in one transaction: rules v1 decide from the row and
    the run's plan, with no history replayed. A cancellation, a lost lease or a changed row take
    the general path: the result saved, then `get_next_stage` (which replays the history)."""
    chosen, nxt = workflow.advance(row.stage, row.community_id, result, plan)
    advanced = stages.complete_and_advance(lease, row, result, chosen, nxt, now=now)
    if advanced is not None:
        return advanced
    stages.save_success(lease, row.id, result, now=now)
    crash_point("after-success-saved")
    return get_next_stage(lease, row.id, now=now)


def get_next_stage(lease: Lease, previous_stage_id: UUID | None, *, now: datetime) -> NextStage:
    """The full next row to execute, Finished, or WaitUntil; one transaction."""
    return stages.transition_stage(lease, lambda req, hist, at: decide(req, hist, at, previous_stage_id), now=now)
