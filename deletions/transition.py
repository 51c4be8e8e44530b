"""UserDeletionTransition: `get_next_stage` (recover or choose the next saved position) and its
common-path form `next_stage`, both `store.stages.transition_stage` with the pure `rules.decide`."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from deletions.contract import Believed, Lease, NextStage
from deletions.rules import workflow
from deletions.rules.decide import advance_from, decide, next_operation
from deletions.store import stages


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


def next_stage(lease: Lease, plan: workflow.Plan, believed: Believed | None, *, now: datetime) -> NextStage:
    """What follows the stage a handler just ran. Evidence believed is saved with the next step the rules
    decide from it and the run's plan, one restart point (`stages.save_and_advance`: no history replayed,
    no lock taken first, fenced). Anything else (a saved failure, a refusal), or a step the fence refuses
    (a cancellation: the result stays saved), takes `transition_stage` from the locked current row."""
    if believed is not None:
        moved = stages.save_and_advance(lease, believed, advance_from(believed.completed(), plan), now=now)
        if moved is not None:
            return moved
    return stages.transition_stage(
        lease, lambda req, hist, at: next_operation(req, hist[0] if hist else None, plan, at), now=now, replay=False
    )


def get_next_stage(lease: Lease, previous_stage_id: UUID | None, *, now: datetime) -> NextStage:
    """The full next row to execute, Finished, or WaitUntil; one transaction."""
    return stages.transition_stage(lease, lambda req, hist, at: decide(req, hist, at, previous_stage_id), now=now)
