"""django-q2 keeps every task result (save_limit 0); the hourly schedule prunes old ones."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone
from django_q.models import Schedule, Task

from ops import schedules

pytestmark = pytest.mark.django_db


def task(name: str, age: timedelta, success: bool) -> Task:
    stopped = timezone.now() - age
    return Task.objects.create(
        id=name.ljust(32, "x")[:32], name=name, func="ops.tasks.beat", started=stopped, stopped=stopped, success=success
    )


def test_old_results_are_pruned_recent_ones_and_recent_failures_kept(monkeypatch) -> None:
    task("fresh-success", timedelta(days=6), True)
    task("old-success", timedelta(days=8), True)
    task("month-old-failure", timedelta(days=20), False)
    task("older-failure", timedelta(days=31), False)
    assert schedules.prune_results(timezone.now()) == 2
    assert sorted(Task.objects.values_list("name", flat=True)) == ["fresh-success", "month-old-failure"]
    monkeypatch.setattr(schedules, "PRUNE_BATCH", 1)
    for i in range(3):
        task(f"batch-{i}", timedelta(days=9 + i), True)
    assert schedules.prune_results(timezone.now()) == 1  # bounded: the oldest first
    assert not Task.objects.filter(name="batch-2").exists() and Task.objects.filter(name="batch-0").exists()


def test_the_cluster_never_prunes_per_task_and_the_schedule_is_registered() -> None:
    assert settings.Q_CLUSTER["save_limit"] == 0
    pruning = Schedule.objects.get(name="ops: prune old task results")
    assert (pruning.func, pruning.minutes) == ("ops.tasks.prune_results", 60)
