"""Enqueue a django-q2 task without ever breaking the caller's commit.

Durable state lives in the database; a lost enqueue is picked up by the
periodic dispatcher / watcher schedule, so a broker error is only logged.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("core.queue")


def enqueue(func: str, *args: Any) -> None:
    try:
        from django_q.tasks import async_task

        async_task(func, *args)
    except Exception:
        logger.exception("enqueue failed func=%s args=%s", func, args)
