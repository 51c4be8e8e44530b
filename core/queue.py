"""Enqueue a django-q2 task without ever breaking the caller's commit.

Durable state lives in the database; a lost enqueue is picked up by the
periodic dispatcher / watcher schedule, so a broker error is only logged.

Two queues: stage runs (deletion stages, purges) go to the site's own queue, served by the
stage cluster; control work (the schedules, watcher steps and their notices) goes to CONTROL,
served by a cluster of its own, so a long stage never delays a heartbeat or a notice.

A stage run that succeeds is not saved as a django-q2 task (`save=False`): its case records the
run (stage rows, attempts, lease events), and saving it cost the monitor a read and an insert
per run. A failed run is saved, and listed under failed tasks with its case; control work is
saved either way.
"""

from __future__ import annotations

import logging
import os
from typing import Any

logger = logging.getLogger("core.queue")

CONTROL = "control"  # the control cluster's name (Q_CLUSTER_NAME) and its queue


def enqueue(func: str, *args: Any, control: bool = False) -> None:
    try:
        from django.conf import settings
        from django_q.tasks import async_task

        # Always named: a process of the control cluster would otherwise put a stage run on its own queue.
        async_task(func, *args, cluster=CONTROL if control else settings.Q_CLUSTER["name"], save=control)
    except Exception:
        logger.exception("enqueue failed func=%s args=%s", func, args)


# Told to stop: `run_workers` gives its clusters a stop file (this variable names it) and creates it
# on the first SIGTERM, before it signals them. A run a worker took from the cluster's prefetched
# tasks after that goes back to the queue untouched, and a running one stops at its next stage
# boundary and releases its lease, so the cluster exits within one stage, never past its lease.
STOP_FILE = "BACKOFFICE_STOP_FILE"


def stopping() -> bool:
    path = os.environ.get(STOP_FILE)
    return bool(path) and os.path.exists(path)  # type: ignore[arg-type]
