"""Long stages on every stage worker never delay the control work (heartbeat, dispatcher,
watchers and their notices): run_workers runs those on a cluster of their own.

Real run_workers, real PostgreSQL, real time: 2 stage workers busy with 120 s stages for 4
minutes while a third case waits, two retirements are requested and the schedules tick. In
`make test` it runs beside the rest of the suite (`tests.alongside`), so the control work is on
time on a machine the suite keeps busy too.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import OrmQ, Task

from core import clock
from core.authority import Actor
from core.queue import CONTROL
from deletions.models import DeletionRequest
from ops import saturation
from ops.models import ClusterHeartbeat
from ops.schedules import ensure_schedules
from retirements.models import NoticeSlot, Workspace
from retirements.services import retirement_request
from tests.conftest import ROOT, manage_argv, submit_and_approve, subprocess_env
from tests.retirements.conftest import ALL_PERMS, make_staff
from tests.support import wait_for

# 4 minutes of real time and little CPU: run in a pytest process of its own beside the rest of
# the suite (`tests.alongside`), on the machine the suite loads.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.alongside,
    pytest.mark.timeout(900),
]

WINDOW = int(os.environ.get("SATURATION_WINDOW", "240"))  # seconds the stage workers stay busy


def test_two_workers_busy_with_120_s_stages_for_4_minutes_delay_no_control_work() -> None:
    hq = make_staff("hq-alice", *ALL_PERMS)
    for slug in ("ws-pushed", "ws-scheduled"):
        Workspace.objects.create(
            slug=slug, name=slug, lifecycle="disabled", activated_at=clock.now(), created_at=clock.now()
        )
    for schedule in ensure_schedules():
        schedule.next_run = timezone.now()
        schedule.save()
    cases = [submit_and_approve(f"demo:busy-{i}") for i in range(3)]  # 3 cases, 2 stage workers
    proc = subprocess.Popen(
        manage_argv("run_workers"),
        cwd=ROOT,
        env=subprocess_env(DELETION_DEMO_STAGE_DELAY_MS="120000", Q_WORKERS="2", Q_CONTROL_WORKERS="2"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    samples = []
    try:
        wait_for(lambda: saturation.read(timezone.now()).busy == 2, timeout=120, what="both stage workers busy")
        wait_for(lambda: ClusterHeartbeat.objects.exists(), timeout=120, what="the control cluster's first heartbeat")
        start = timezone.now()
        # A retirement whose watcher step is pushed on commit (to the control queue) ...
        pushed = retirement_request(actor=Actor.of(hq), slug="ws-pushed", reason="merged", confirmation="ws-pushed")
        wait_for(
            lambda: NoticeSlot.objects.filter(request_id=pushed.id, status="delivered").exists(),
            timeout=60,
            what="the pushed retirement's first notice",
        )
        # ... and one whose push is lost: only the scheduled watcher tick (each minute) can find it.
        scheduled = retirement_request(
            actor=Actor.of(hq), slug="ws-scheduled", reason="merged", confirmation="ws-scheduled"
        )
        OrmQ.objects.filter(key=CONTROL, payload__isnull=False).delete()
        while (timezone.now() - start).total_seconds() < WINDOW:
            now = timezone.now()
            beat = ClusterHeartbeat.objects.order_by("-seen_at").values_list("seen_at", flat=True).first()
            full = saturation.read(now)
            samples.append((now, (now - beat).total_seconds() if beat else None, full.busy, full.saturated))
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(5)  # a sampling interval, not a wait for an event
        end = timezone.now()
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.stderr is not None
        said = ""
        while proc.poll() is None and "stopping the clusters" not in said:
            said = proc.stderr.readline()
        proc.send_signal(signal.SIGINT)  # the second Ctrl-C: stop at once, leases expire on their own
        _, err = proc.communicate(timeout=60)

    # The stage workers were busy the whole window and a case waited: saturated (but for the
    # moment between a stage's end and the next run's claim). Both workers started together on
    # stages of the same length, so their runs turn over at about the same moment, every 120 s:
    # a sample may fall in one such moment with both between runs, never in more.
    idle = [i for i, (_, _, busy, _) in enumerate(samples) if busy == 0]
    apart = all(b - a > 1 for a, b in itertools.pairwise(idle))
    assert len(idle) <= WINDOW // 120 and apart, [s[2] for s in samples]
    assert sum(1 for *_, full in samples if full) >= 0.8 * len(samples), [(s[2], s[3]) for s in samples]
    # The heartbeat stayed fresh (it beats each minute; health turns red at 110 s, ops.health).
    ages = [age for _, age, _, _ in samples]
    assert all(age is not None and age < 90 for age in ages), ages
    # The dispatcher ran every minute through the window.
    runs = sorted(
        Task.objects.filter(func="deletions.tasks.dispatch", started__gte=start, started__lte=end).values_list(
            "started", flat=True
        )
    )
    assert len(runs) >= 3, runs
    gaps = [(b - a).total_seconds() for a, b in zip([start, *runs], [*runs, end], strict=True)]
    assert max(gaps) < 95, gaps
    # Each retirement's first notice went out on time: pushed within seconds, the scheduled one
    # on the next watcher tick (each minute), while no stage worker was free.
    for request, limit in ((pushed, timedelta(seconds=30)), (scheduled, timedelta(seconds=95))):
        notice = NoticeSlot.objects.get(request_id=request.id, kind="request_received")
        assert notice.status == "delivered", (notice.status, notice.last_error, err[-2000:])
        assert notice.delivered_at is not None and notice.delivered_at - notice.due_at < limit, (
            notice.due_at,
            notice.delivered_at,
        )
    # Meanwhile no stage ran twice and nothing finished early: 120 s stages, 2 at a time.
    assert DeletionRequest.objects.filter(id__in=[c.id for c in cases], status="completed").count() == 0
