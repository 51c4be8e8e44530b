"""The periodic django-q2 schedules, registered idempotently (migration or `setup_schedules`)."""

from __future__ import annotations

from typing import Any

SCHEDULES = {
    "deletions: dispatch due runs": "deletions.tasks.dispatch",
    "retirements: run due watcher steps": "retirements.tasks.run_due",
    "ops: cluster heartbeat": "ops.tasks.beat",
}


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
            name=name, defaults={"func": func, "schedule_type": "I", "minutes": 1, "repeats": -1}
        )[0]
        for name, func in SCHEDULES.items()
    ]
