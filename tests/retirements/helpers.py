from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import time_machine
from django.conf import settings
from django.core import mail
from django.utils import timezone

from core import clock
from core.authority import Actor
from retirements import purge, watcher
from retirements.models import Alarm, PurgeJob, RetirementRequest
from retirements.services import retirement_request
from retirements.store import purge as store_purge
from retirements.watcher import run_due


def request_at(at: datetime, actor: Any, slug: str = "acme-old") -> RetirementRequest:
    with time_machine.travel(at, tick=False):
        return retirement_request(actor=Actor.of(actor), slug=slug, reason="contract ended", confirmation=slug)


def run_at(at: datetime) -> dict[str, Any]:
    with time_machine.travel(at, tick=False):
        return run_due(now=clock.now())


def subjects() -> list[str]:
    return [str(m.subject) for m in mail.outbox]


def fresh(request: RetirementRequest) -> RetirementRequest:
    return RetirementRequest.objects.select_related("workspace").get(id=request.id)


def notice_states(request: RetirementRequest) -> dict[str, str]:
    return dict(request.notices.values_list("kind", "status"))


def executing(hq, make_workspace, slug: str = "acme-old"):
    """A retirement past its point of no return, its purge job queued and not yet run."""
    make_workspace(slug, activated=False)
    T = timezone.now() - timedelta(days=2)
    req = request_at(T, hq, slug=slug)
    run_at(T)  # notices
    with time_machine.travel(req.eligible_at + timedelta(minutes=1), tick=False):
        watcher_id = fresh(req).watcher_id
        assert watcher_id is not None and watcher.step(watcher_id, now=clock.now()) == "proceed"
    return fresh(req), PurgeJob.objects.get(request=req)


def reject_a_stale_executor(hq, make_workspace) -> tuple[RetirementRequest, PurgeJob, str]:
    """Executor A (its own thread and connection) claims the purge and stalls; time passes its
    lease; B claims the next generation and purges; A, let go, applies with its old token. The
    request, its job and what A was told."""
    req, job = executing(hq, make_workspace)
    start = timezone.now()
    claimed, go = threading.Event(), threading.Event()
    said: dict[str, str] = {}

    def executor_a() -> None:
        from django.db import connection

        try:
            generation = store_purge.claim_purge(
                job.id, owner="executor-a", now=start, lease_seconds=settings.RETIREMENT_PURGE_LEASE_SECONDS
            )
            assert generation is not None
            claimed.set()
            assert go.wait(timeout=120)
            said["a"] = purge.apply(job.id, owner="executor-a", generation=generation, now=clock.now())
        finally:
            connection.close()

    a = threading.Thread(target=executor_a)
    a.start()
    assert claimed.wait(timeout=120), "executor A never claimed"
    job.refresh_from_db()
    assert (job.lease_owner, job.lease_generation) == ("executor-a", 1) and job.lease_expires_at is not None
    assert not Alarm.objects.filter(request=req, kind="purge_stale_executor").exists()
    with time_machine.travel(job.lease_expires_at + timedelta(seconds=1), tick=False):
        assert purge.run_purge(job.id, now=clock.now(), owner="executor-b").endswith("done")
        go.set()
        a.join(timeout=120)
    assert not a.is_alive()
    return req, job, said["a"]
