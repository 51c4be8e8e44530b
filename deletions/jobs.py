"""What the deletion workflow puts on the queue: one helper per task, beside nothing it runs."""

from __future__ import annotations

from uuid import UUID

from core.queue import enqueue


def enqueue_run(request_id: UUID, target: str | None) -> None:
    """A run of the request; its target named, so the run reads the target's fence before its claim
    without reading the request first (`worker.run`; None: the run reads it)."""
    enqueue("deletions.tasks.run_deletion", str(request_id), target)
