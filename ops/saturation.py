"""How full the stage workers are: busy workers, cases waiting for one and the oldest wait, and
the runs queued at the broker (stage queue and control queue). Read by the overview, `/metrics`
and health alike; which case waits is the pure `deletions.case.queued`, never a copy of it.

One bounded read of the cases in flight (approved, running, retrying: a small set in a healthy
system; past IN_FLIGHT_LIMIT the counts read "N+") and one count per queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from core.queue import CONTROL
from deletions import case
from deletions import selectors as deletion_selectors
from retirements.models import PurgeJob, PurgeStatus

IN_FLIGHT_LIMIT = 500
WAIT_LATE = timedelta(minutes=30)  # health turns red when a case has waited this long for a worker


@dataclass(frozen=True)
class Saturation:
    busy: int  # stage workers holding a live lease now (deletion stages and purges)
    per_host: int  # stage workers each run_workers starts (Q_WORKERS)
    waiting: list[tuple[Any, datetime]]  # queued cases and since when, the longest wait first
    capped: bool  # more cases in flight than were read
    stage_runs_queued: int | None  # at the broker; None when it could not be asked
    control_runs_queued: int | None

    @property
    def oldest(self) -> datetime | None:
        return self.waiting[0][1] if self.waiting else None

    @property
    def saturated(self) -> bool:
        """Every stage worker of a host is busy and a case waits for one."""
        return self.busy >= self.per_host and bool(self.waiting)

    def waited(self, now: datetime) -> float:
        return (now - self.oldest).total_seconds() if self.oldest else 0.0


def read(now: datetime) -> Saturation:
    rows = deletion_selectors.in_flight(IN_FLIGHT_LIMIT)
    busy = sum(1 for r in rows if case.lease_live(r, now))
    busy += PurgeJob.objects.filter(status=PurgeStatus.QUEUED, lease_expires_at__gt=now).count()
    waiting = sorted(
        ((r, case.queued_since(r)) for r in rows if case.queued(r, now, bool(getattr(r, "unsettled", False)))),
        key=lambda p: p[1],
    )
    return Saturation(
        busy=busy,
        per_host=int(str(settings.Q_CLUSTER["workers"])),
        waiting=waiting,
        capped=len(rows) > IN_FLIGHT_LIMIT - 1,
        stage_runs_queued=_queued_runs(None),
        control_runs_queued=_queued_runs(CONTROL),
    )


def _queued_runs(queue: str | None) -> int | None:
    try:
        from django_q.brokers import get_broker

        return int(get_broker(queue).queue_size())
    except Exception:  # a broker that does not answer is shown as unknown, never as zero
        return None
