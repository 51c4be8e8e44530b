"""UserDeletionTransition.get_next_stage: recover or choose the next saved position.

One rule decides what follows a saved position (`next_operation`); it is given the current row
either by a full replay of the history (`decide`, after a restart or a staff decision) or, on the
common path, straight from the locked row with the run's approved plan (`next_stage`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

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


def next_operation(
    request: RequestSnapshot, current: StageSnapshot | None, plan: workflow.Plan, now: datetime
) -> Operation:
    """Pure: the operation that moves this request on from its current row."""
    if request.status == "completed":
        return AlreadyFinished()
    if current is None:
        return Initialize(workflow.initial_stage(plan.target))
    if current.status == "completed":
        chosen, nxt = workflow.advance(current.stage, current.community_id, current.result, plan)
        return Advance(completed_stage_id=current.id, decision=chosen, successor=nxt)
    if current.status == "failed" and request.next_attempt_at is not None and request.next_attempt_at > now:
        return WaitUntil(request.next_attempt_at)
    return Resume(current.id)


def decide(
    request: RequestSnapshot, history: list[StageSnapshot], now: datetime, previous_stage_id: UUID | None = None
) -> Operation:
    """Pure: reconstruct the saved history (every row checked against the approved inventory),
    then `next_operation` from its current row."""
    if previous_stage_id is not None and previous_stage_id not in {s.id for s in history}:
        raise WorkflowError(f"stage {previous_stage_id} does not belong to request {request.id}")
    if request.inventory is None:
        raise WorkflowError(f"request {request.id} was not read with its inventory; nothing to replay")
    if request.status == "completed":
        return AlreadyFinished()
    progress = workflow.reconstruct(history, request.inventory, request.inventory_version)
    return next_operation(request, progress.current, workflow.Plan.of(request.inventory), now)


def start(lease: Lease, status: str, inventory: dict[str, Any], version: int, *, now: datetime) -> NextStage:
    """The run's first position: an approved request with no history is initialized in one
    statement (after the same inventory checks a replay makes); anything else (a saved history
    to resume) goes through `get_next_stage`."""
    if status == "approved":
        workflow.reconstruct([], inventory, version)  # refuses an inventory rules v1 cannot run
        first = stages.start(lease, workflow.initial_stage(inventory["target"]), now=now)
        if first is not None:
            return first
    return get_next_stage(lease, None, now=now)


def next_stage(lease: Lease, plan: workflow.Plan, *, now: datetime) -> NextStage:
    """What follows the stage a handler just saved, decided from the locked current row and the
    run's plan (no history replayed): the same rule and the same writes as `get_next_stage`."""
    return stages.transition_stage(
        lease, lambda req, hist, at: next_operation(req, hist[0] if hist else None, plan, at), now=now, replay=False
    )


def get_next_stage(lease: Lease, previous_stage_id: UUID | None, *, now: datetime) -> NextStage:
    """The full next row to execute, Finished, or WaitUntil; one transaction."""
    return stages.transition_stage(lease, lambda req, hist, at: decide(req, hist, at, previous_stage_id), now=now)
