"""django-q2 entry points for deletions (thin)."""

from __future__ import annotations

import logging
import os
import socket
from uuid import UUID

from core.errors import DomainError

logger = logging.getLogger("deletions")


def enqueue_run(request_id: UUID) -> None:
    try:
        from django_q.tasks import async_task

        async_task("deletions.tasks.run_deletion", str(request_id))
    except Exception:
        logger.exception("enqueue failed request=%s", request_id)


def run_deletion(request_id: str) -> str:
    """Run to the end or the next wait; a refusal (lease held, not due) is a normal outcome."""
    from deletions import worker

    executor = f"q:{socket.gethostname()}:{os.getpid()}"
    try:
        outcome = worker.run(UUID(request_id), executor_id=executor)
    except DomainError as exc:
        logger.info("run refused request=%s executor=%s: %s", request_id, executor, exc.message)
        return f"refused: {exc.message}"
    return outcome.message
