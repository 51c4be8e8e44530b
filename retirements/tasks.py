"""django-q2 entry points for retirements (thin)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from core.queue import enqueue


def enqueue_watcher_step(watcher_id: UUID) -> None:
    enqueue("retirements.tasks.watcher_step", str(watcher_id))


def enqueue_purge(job_id: int) -> None:
    enqueue("retirements.tasks.purge", job_id)


def watcher_step(watcher_id: str) -> str:
    from core import clock
    from retirements import watcher

    return watcher.step(UUID(watcher_id), now=clock.now())


def purge(job_id: int) -> str:
    from core import clock
    from retirements.purge import run_purge

    return run_purge(job_id, now=clock.now())


def run_due() -> dict[str, Any]:
    from core import clock
    from retirements import watcher

    return watcher.run_due(now=clock.now())
