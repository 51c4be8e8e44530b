"""What the deletion workflow puts on the queue: one helper per task, beside nothing it runs."""

from __future__ import annotations

from uuid import UUID

from core.queue import enqueue


def enqueue_run(request_id: UUID) -> None:
    enqueue("deletions.tasks.run_deletion", str(request_id))
