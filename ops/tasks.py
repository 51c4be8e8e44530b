"""django-q2 entry points for operations (thin)."""

from __future__ import annotations

from core import clock


def beat() -> None:
    """Scheduled every minute: record that this cluster runs its schedule (what `health` reads)."""
    from ops.health import beat as record_beat

    record_beat(clock.now())


def prune_results() -> int:
    """Scheduled hourly: old django-q2 task results go (see `ops.schedules.prune_results`)."""
    from ops.schedules import prune_results as prune

    return prune(clock.now())


def send_notifications() -> dict[str, int]:
    """Scheduled every minute: name people, tell them what waits for them (`ops.notify.tick`)."""
    from ops.notify import tick

    return tick(clock.now())


def apply_retention() -> dict[str, int]:
    """Scheduled daily: what is past its retention period goes (`ops.retention.run`)."""
    from ops.retention import run

    return dict(run().counts)
