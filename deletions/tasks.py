"""django-q2 entry points for deletions (thin)."""

from __future__ import annotations

import logging
import os
import socket
from uuid import UUID

from django.conf import settings

from core import clock, queue
from core.errors import DomainError
from deletions import dispatch as dispatcher
from deletions import reapply, withdrawals, worker
from deletions.handlers import RunOptions
from deletions.jobs import enqueue_run

logger = logging.getLogger("deletions")


class StageFailed(Exception):
    """Raised after a failure or a refusal is saved, so django-q2 lists the task under failed tasks."""


def run_deletion(request_id: str, target: str | None = None) -> str:
    """Run until done, a wait, or the time budget; a refusal (lease held, not due) is normal.

    A run that stopped on its time budget re-enqueues itself; the dispatcher
    would pick it up anyway. `target`: the request's, as its enqueuer read it (a task queued before
    it was passed has none: the run reads it).
    """
    if queue.stopping():  # taken from the prefetched tasks after the cluster was told to stop
        enqueue_run(UUID(request_id), target)
        return "returned to the queue untouched: this cluster is stopping"
    executor = f"q:{socket.gethostname()}:{os.getpid()}"
    options = RunOptions(stage_delay_ms=settings.DELETION_DEMO_STAGE_DELAY_MS)
    try:
        outcome = worker.run(
            UUID(request_id),
            executor_id=executor,
            target=target,
            options=options,
            time_budget=settings.DELETION_TASK_SECONDS,
            told_to_stop=queue.stopping,
        )
    except DomainError as exc:
        if queue.stopping():  # stopped at a stage boundary, lease released: another cluster goes on
            enqueue_run(UUID(request_id), target)
        return f"refused: {exc.message}"
    if outcome.more_to_do:
        enqueue_run(UUID(request_id), target)
    if outcome.stage_failed or outcome.refused:
        raise StageFailed(f"request {request_id}: {outcome.message}")
    return outcome.message


def dispatch() -> int:
    """Each minute: authority withdrawn from cases whose approver or requester lost their permission, the
    target systems told of withdrawals they have not acknowledged, the deletions a restored receiver lost
    applied again (`reapply`), and the due runs enqueued."""
    withdrawals.withdraw_lost_authority(now=clock.now())
    withdrawals.push(now=clock.now())
    reapply.reapply_all(clock.now(), due_only=True)
    return len(dispatcher.dispatch(clock.now()))
