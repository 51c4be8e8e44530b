"""What follows a saved position: the seed's lock → decide → apply contract's decide. Pure.

One rule decides what follows a saved position (`next_operation`); it is given the current row
either by a full replay of the history (`decide`, after a restart or a staff decision) or, on the
common path, straight from the locked row with the run's approved plan.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from deletions.contract import (
    Advance,
    AlreadyFinished,
    EndCancelled,
    Initialize,
    Operation,
    RequestSnapshot,
    Resume,
    StageSnapshot,
    WaitUntil,
)
from deletions.errors import WorkflowError
from deletions.rules import workflow


def next_operation(
    request: RequestSnapshot, current: StageSnapshot | None, plan: workflow.Plan, now: datetime
) -> Operation:
    """Pure: the operation that moves this request on from its current row."""
    if request.status == "completed":
        return AlreadyFinished()
    if request.cancel_requested:
        if current is not None and current.submitted_at is not None and current.status != "completed":
            # Its outcome is unknown: it is looked up (and nothing new is sent: the grant is refused
            # once a cancellation is recorded) before the request can end.
            return Resume(current.id)
        return EndCancelled()
    if current is None:
        return Initialize(workflow.initial_stage(plan.target))
    if current.status == "completed":
        return advance_from(current, plan)
    if current.status == "failed" and request.next_attempt_at is not None and request.next_attempt_at > now:
        return WaitUntil(request.next_attempt_at)
    return Resume(current.id)


def advance_from(completed: StageSnapshot, plan: workflow.Plan) -> Advance:
    """Pure: what a completed row's saved result decides under rules v1."""
    chosen, nxt = workflow.advance(completed.stage, completed.community_id, completed.result, plan)
    return Advance(completed_stage_id=completed.id, decision=chosen, successor=nxt)


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
