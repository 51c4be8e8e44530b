"""The periodic django-q2 schedule that runs due watcher steps (idempotent)."""

from django_q.models import Schedule

RUN_DUE = "retirements: run due watcher steps"


def ensure_schedules() -> Schedule:
    schedule, _ = Schedule.objects.update_or_create(
        name=RUN_DUE,
        defaults={"func": "retirements.tasks.run_due", "schedule_type": Schedule.MINUTES, "minutes": 1, "repeats": -1},
    )
    return schedule
