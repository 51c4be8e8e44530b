"""The periodic django-q2 schedules, registered idempotently (migration or `setup_schedules`)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q

from core.queue import CONTROL

SCHEDULES = {
    "deletions: dispatch due runs": "deletions.tasks.dispatch",
    "retirements: run due watcher steps": "retirements.tasks.run_due",
    "retirements: age alarms": "retirements.tasks.age_alarms",
    "ops: cluster heartbeat": "ops.tasks.beat",
    "ops: prune old task results": "ops.tasks.prune_results",
    "ops: send notifications": "ops.tasks.send_notifications",
    "ops: apply retention": "ops.tasks.apply_retention",
    "api: send webhooks": "api.tasks.send_webhooks",
}
MINUTES = {
    "ops: prune old task results": 60,
    "retirements: age alarms": 60,
    "ops: apply retention": 1440,
}  # every other schedule runs each minute
# Every schedule belongs to the control cluster: its scheduler creates the runs and its workers
# take them, so stages filling the stage workers never delay them.

# django-q2 saves every task's result (save_limit 0: its monitor never counts or prunes them
# per task, which made it lock and load all saved results for each finished task); old rows
# are deleted here instead, in bounded batches.
KEEP_SUCCESSES = timedelta(days=7)
KEEP_FAILURES = timedelta(days=30)
PRUNE_BATCH = 5_000


def prune_results(now: datetime, task_model: Any = None) -> int:
    """Delete up to PRUNE_BATCH successful task results older than a week and failed ones older
    than a month; returns how many went. Indexed on `stopped`, so a tick stays bounded."""
    if task_model is None:
        from django_q.models import Task

        task_model = Task
    old = Q(success=True, stopped__lt=now - KEEP_SUCCESSES) | Q(success=False, stopped__lt=now - KEEP_FAILURES)
    ids = list(task_model.objects.filter(old).order_by("stopped").values_list("id", flat=True)[:PRUNE_BATCH])
    return task_model.objects.filter(id__in=ids).delete()[0] if ids else 0


def missing(schedule_model: Any = None) -> list[str]:
    """The product's schedules that are not registered (someone deleted one)."""
    if schedule_model is None:
        from django_q.models import Schedule

        schedule_model = Schedule
    present = set(schedule_model.objects.filter(name__in=SCHEDULES).values_list("name", flat=True))
    return [name for name in SCHEDULES if name not in present]


def ensure_schedules(schedule_model: Any = None) -> list[Any]:
    if schedule_model is None:
        from django_q.models import Schedule

        schedule_model = Schedule
    return [
        schedule_model.objects.update_or_create(
            name=name,
            defaults={
                "func": func,
                "schedule_type": "I",
                "minutes": MINUTES.get(name, 1),
                "repeats": -1,
                "cluster": CONTROL,
            },
        )[0]
        for name, func in SCHEDULES.items()
    ]
