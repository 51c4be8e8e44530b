from __future__ import annotations

import threading
import time
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


BUSY = (
    "the watcher is working on this workspace right now (or another decision is); nothing was recorded: "
    "try again in a moment"
)


def behind_a_watcher_mid_step(request: RetirementRequest, decide: Any) -> tuple[Any, float]:
    """`decide()` run while another connection holds the workspace and request rows as a watcher
    mid-step does (let go once it returns): what it returned and how long it took."""
    from django.db import connection, transaction

    locked, release = threading.Event(), threading.Event()

    def watcher_mid_step() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cur:
                cur.execute(
                    "SELECT 1 FROM retirements_retirementrequest r JOIN retirements_workspace w"
                    " ON w.id = r.workspace_id WHERE r.id = %s FOR UPDATE OF w, r",
                    [request.id],
                )
                locked.set()
                assert release.wait(timeout=120)
        finally:
            connection.close()

    holder = threading.Thread(target=watcher_mid_step)
    holder.start()
    try:
        assert locked.wait(timeout=60), "the other connection never took the locks"
        started = time.monotonic()
        said = decide()
        return said, time.monotonic() - started
    finally:
        release.set()
        holder.join(timeout=60)
