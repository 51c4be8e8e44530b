"""What the retirement workflow puts on the queue: one helper per task, beside nothing it runs."""

from __future__ import annotations

from uuid import UUID

from core.queue import enqueue


def enqueue_watcher_step(watcher_id: UUID) -> None:
    enqueue("retirements.tasks.watcher_step", str(watcher_id), control=True)  # it sends the notices


def enqueue_purge(job_id: int) -> None:
    enqueue("retirements.tasks.purge", job_id)  # the destruction runs with the stages
