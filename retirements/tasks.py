"""django-q2 entry points for retirements (thin)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from core import clock
from retirements import watcher
from retirements.purge import run_purge


def watcher_step(watcher_id: str) -> str:
    return watcher.step(UUID(watcher_id), now=clock.now())


def purge(job_id: int) -> str:
    return run_purge(job_id, now=clock.now())


def run_due() -> dict[str, Any]:
    return watcher.run_due(now=clock.now())


def age_alarms() -> list[dict[str, str]]:
    return watcher.age_alarms(now=clock.now())
