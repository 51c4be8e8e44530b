"""Real clusters (run_workers: stage and control) run a disposable retirement from request to deleted."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
from django.utils import timezone

from core.authority import Actor
from ops.schedules import ensure_schedules
from retirements.models import PurgeJob, Workspace
from retirements.services import retirement_request
from tests.conftest import ROOT, manage_argv, subprocess_env

# Beside the rest of the suite (`tests.alongside`): a real cluster's waiting period, in processes of its own.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.alongside,
    pytest.mark.timeout(900),
]


def test_qcluster_runs_a_disposable_retirement_to_deleted(hq, make_workspace, settings) -> None:
    settings.RETIREMENT_DISPOSABLE_WAIT_SECONDS = 3
    for schedule in ensure_schedules():
        schedule.next_run = timezone.now()
        schedule.save()
    make_workspace("scratch-ws", is_disposable_test=True)
    request = retirement_request(actor=Actor.of(hq), slug="scratch-ws", reason="test data", confirmation="scratch-ws")
    cluster = subprocess.Popen(
        manage_argv("run_workers"),
        cwd=ROOT,
        env=subprocess_env(RETIREMENT_DISPOSABLE_WAIT_SECONDS="3"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            if Workspace.objects.get(slug="scratch-ws").lifecycle == "deleted":
                break
            assert cluster.poll() is None, "run_workers exited early"
            time.sleep(1)
    finally:
        cluster.send_signal(signal.SIGTERM)
        try:
            _, err = cluster.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            cluster.kill()
            _, err = cluster.communicate()
    ws = Workspace.objects.get(slug="scratch-ws")
    assert ws.lifecycle == "deleted", err[-3000:]
    job = PurgeJob.objects.get(request_id=request.id)
    assert job.status == "done"
    statuses = dict(request.notices.values_list("kind", "status"))
    assert statuses["request_received"] == "delivered" and statuses["final_warning"] == "delivered"
    actions = list(request.decisions.order_by("id").values_list("action", flat=True))
    assert actions == ["request", "point_of_no_return", "purged"]
