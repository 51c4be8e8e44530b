"""The dispatcher picks up approved requests, due retries and expired leases; nothing else."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone
from django_q.models import OrmQ

from core.authority import named
from core.logs import JsonFormatter
from deletions import worker
from deletions.dispatch import dispatch, due_request_ids
from deletions.handlers import RunOptions
from deletions.models import DeletionRequest, LeaseEvent
from deletions.services import deletion_approve, deletion_cancel, deletion_submit
from deletions.store import leases
from ops.models import ClusterHeartbeat
from tests.conftest import submit_and_approve

pytestmark = pytest.mark.django_db


def test_approval_enqueues_the_run_on_commit(django_capture_on_commit_callbacks) -> None:
    req = deletion_submit(target="demo:a", actor=named("operator-a"))
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    assert len(callbacks) == 1 and OrmQ.objects.count() == 1


def test_dispatcher_selects_only_work_that_is_due() -> None:
    now = timezone.now()
    approved = submit_and_approve("demo:approved")
    deletion_submit(target="demo:submitted", actor=named("operator-a"))
    leased = submit_and_approve("demo:leased")
    leases.claim(request_id=leased.id, owner="w", now=now, lease_seconds=60)
    retry = submit_and_approve("demo:retry")
    worker.run(retry.id, executor_id="w", options=RunOptions(fail_stage="gate_user"))
    done = submit_and_approve("demo:done")
    worker.run(done.id, executor_id="w")
    cancelled = submit_and_approve("demo:cancelled")
    deletion_cancel(request_id=cancelled.id, actor=named("operator-c"), reason="r")

    assert set(due_request_ids(now)) == {approved.id}
    later = now + timedelta(seconds=61)  # the retry is due and the lease expired
    assert set(due_request_ids(later)) == {approved.id, retry.id, leased.id}


def test_dispatch_enqueues_due_runs() -> None:
    req = submit_and_approve()
    OrmQ.objects.all().delete()
    assert dispatch(timezone.now()) == [req.id]
    assert OrmQ.objects.count() == 1


def test_the_heartbeat_schedule_records_this_cluster() -> None:
    from ops.tasks import beat

    beat()
    beat()
    (row,) = ClusterHeartbeat.objects.all()
    assert timezone.now() - row.seen_at < timedelta(seconds=5)


def test_takeover_is_recorded_in_the_lease_history_only_after_expiry() -> None:
    req = submit_and_approve()
    t0 = timezone.now()
    first = leases.claim(request_id=req.id, owner="w1", now=t0, lease_seconds=60)
    with time_machine.travel(t0 + timedelta(seconds=61), tick=False):
        leases.claim(request_id=req.id, owner="w2", now=t0 + timedelta(seconds=61), lease_seconds=60)
    events = list(
        LeaseEvent.objects.filter(request=req).order_by("generation").values_list("event", "owner", "generation")
    )
    assert events == [("claim", "w1", first.generation), ("takeover", "w2", first.generation + 1)]
    takeover = LeaseEvent.objects.get(event="takeover")
    assert (
        takeover.previous_owner == "w1"
        and takeover.previous_expires_at is not None
        and takeover.at >= takeover.previous_expires_at
    )


def test_structured_log_lines_carry_ids(caplog) -> None:
    req = submit_and_approve()
    with caplog.at_level(logging.INFO, logger="deletions"):
        worker.run(req.id, executor_id="worker-x", next_step=True)
    lines = [json.loads(JsonFormatter().format(r)) for r in caplog.records if hasattr(r, "event")]
    events = [line["event"] for line in lines]
    assert {"claim", "transition", "release"} <= set(events)
    claim = next(line for line in lines if line["event"] == "claim")
    assert claim["request_id"] == str(req.id) and claim["executor"] == "worker-x" and claim["generation"] == 1
    transition = next(line for line in lines if line["event"] == "transition" and line.get("stage_id"))
    assert transition["stage"] in ("gate_user", "purge_db")
    assert all("demo:" not in json.dumps(line) for line in lines)


def test_cancellation_of_a_running_request_whose_worker_died_is_finished_by_the_next_run() -> None:
    req = submit_and_approve()
    t0 = timezone.now()
    lease = leases.claim(request_id=req.id, owner="dead", now=t0, lease_seconds=60)
    from deletions.transition import get_next_stage

    get_next_stage(lease, None, now=t0)  # running, then the worker dies
    deletion_cancel(request_id=req.id, actor=named("operator-c"), reason="stop")
    assert DeletionRequest.objects.get(id=req.id).status == "running"
    with time_machine.travel(t0 + timedelta(seconds=61), tick=False):
        assert req.id in due_request_ids(t0 + timedelta(seconds=61))
        outcome = worker.run(req.id, executor_id="next")
    assert outcome.exit_code == 1 and "cancelled" in outcome.message
    assert DeletionRequest.objects.get(id=req.id).status == "cancelled"
