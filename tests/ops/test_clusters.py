"""Real qcluster processes execute deletions: no run_deletion, crashes, duplicates, two hosts."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import psutil
import pytest
from django.db import connections
from django.utils import timezone
from django_q.models import OrmQ
from django_q.tasks import async_task

from core.queue import enqueue
from deletions.models import DeletionRequest, LeaseEvent, StageHistory
from ops.schedules import ensure_schedules
from tests.conftest import ROOT, manage_argv, submit_and_approve, subprocess_env
from tests.support import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.timeout(900)]


@contextmanager
def cluster(command: str = "qcluster", **env: str) -> Iterator[subprocess.Popen[str]]:
    """A qcluster (or `run_workers`) in its own process group, stopped with SIGTERM (or already killed)."""
    proc = subprocess.Popen(
        manage_argv(command),
        cwd=ROOT,
        env=subprocess_env(**env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        else:
            proc.communicate()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # no orphaned worker survives a test


def schedules_due_now() -> None:
    for schedule in ensure_schedules():
        schedule.next_run = timezone.now()
        schedule.save()


def effects() -> list[tuple]:
    with connections["target"].cursor() as cur:
        cur.execute("SELECT operation_id, request_id, generation, executor FROM receiver.receiver_operations")
        return cur.fetchall()


def status(request_id) -> str:
    return DeletionRequest.objects.values_list("status", flat=True).get(id=request_id)


def test_a_cluster_executes_an_approved_deletion_with_nobody_calling_run(cmd) -> None:
    req = submit_and_approve()  # approval enqueued the run on commit
    with cluster():
        wait_for(lambda: status(req.id) == "completed", timeout=240, what="completion by the cluster")
    assert StageHistory.objects.filter(request_id=req.id).count() == 6
    assert {e[3].split(":")[0] for e in effects()} == {"q"}


def test_cluster_killed_mid_stage_is_finished_by_the_dispatcher_and_another_cluster() -> None:
    req = submit_and_approve()
    with cluster(DELETION_LEASE_SECONDS="6", DELETION_DEMO_STAGE_DELAY_MS="60000") as first:
        row = wait_for(
            lambda: StageHistory.objects.filter(request_id=req.id, status="running").first(),
            timeout=240,
            what="a stage",
        )
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=120)
    killed = DeletionRequest.objects.get(id=req.id)
    assert killed.lease_owner is not None and killed.status == "running"
    expires = killed.lease_expires_at
    assert expires is not None
    OrmQ.objects.all().delete()  # the killed cluster's task is gone: only the dispatcher can bring the work back
    # Once the dead cluster's lease has run out, one dispatcher tick, as its schedule enqueues it
    # each minute (that the scheduler does so is tests/workers/test_saturation.py's): it runs on
    # the control cluster, the stage run it enqueues on the stage cluster.
    wait_for(lambda: expires < timezone.now(), timeout=60, what="the dead cluster's lease to run out")
    enqueue("deletions.tasks.dispatch", control=True)
    with cluster(DELETION_LEASE_SECONDS="6"), cluster(DELETION_LEASE_SECONDS="6", Q_CLUSTER_NAME="control"):
        wait_for(lambda: status(req.id) == "completed", timeout=240, what="completion after takeover")
    resumed = StageHistory.objects.get(id=row.id)
    assert resumed.status == "completed" and resumed.started_at == row.started_at and resumed.attempts == 2
    assert (
        StageHistory.objects.filter(
            request_id=req.id, stage=row.stage, target_community_id=row.target_community_id
        ).count()
        == 1
    )
    takeover = LeaseEvent.objects.get(request_id=req.id, event="takeover")
    assert (
        takeover.previous_owner == killed.lease_owner
        and takeover.previous_expires_at is not None
        and takeover.at >= takeover.previous_expires_at
    )


def test_duplicate_delivery_executes_each_stage_once() -> None:
    req = submit_and_approve()
    for _ in range(5):
        async_task("deletions.tasks.run_deletion", str(req.id))
    with cluster(Q_WORKERS="4", DELETION_DEMO_STAGE_DELAY_MS="200"):
        wait_for(lambda: status(req.id) == "completed", timeout=240, what="completion")
        wait_for(lambda: not OrmQ.objects.exists(), timeout=60, what="all duplicate deliveries consumed")
    rows = StageHistory.objects.filter(request_id=req.id)
    assert rows.count() == 6 and set(rows.values_list("attempts", flat=True)) == {1}
    ops = effects()
    assert len(ops) == 6 and len({op[0] for op in ops}) == 6
    claims = LeaseEvent.objects.filter(request_id=req.id).exclude(event="release")
    assert not claims.filter(event="takeover").exists()


@pytest.mark.timeout(900)
def test_two_clusters_drain_200_requests_together() -> None:
    requests = [submit_and_approve(f"demo:drain-{i}") for i in range(200)]
    with cluster(Q_WORKERS="2"), cluster(Q_WORKERS="2"):
        wait_for(
            lambda: DeletionRequest.objects.filter(status="completed").count() == 200, timeout=600, what="all 200 done"
        )
    ops = effects()
    per_request = Counter(op[1] for op in ops)
    executors = Counter(op[3].rsplit(":", 1)[0] + ":" + op[3].rsplit(":", 1)[1] for op in ops)
    hosts = Counter(op[3] for op in ops)
    events = Counter(LeaseEvent.objects.values_list("event", flat=True))
    attempts = Counter(StageHistory.objects.values_list("attempts", flat=True))
    print(
        f"\ndrain: {len(requests)} requests, {len(ops)} effects, {len(hosts)} worker processes {dict(hosts)}, "
        f"lease events {dict(events)}, stage attempts {dict(attempts)}"
    )
    assert len(ops) == 1200 and set(per_request.values()) == {6}
    assert len({op[0] for op in ops}) == 1200  # every stage handler ran once, for one generation
    assert attempts == Counter({1: 1200})
    assert len(executors) >= 2
    for takeover in LeaseEvent.objects.filter(event="takeover"):
        assert takeover.previous_expires_at is not None and takeover.at >= takeover.previous_expires_at


def test_sigterm_lets_the_running_stage_finish_and_releases_the_lease() -> None:
    req = submit_and_approve()
    with cluster(DELETION_DEMO_STAGE_DELAY_MS="3000", DELETION_TASK_SECONDS="1") as proc:
        wait_for(
            lambda: StageHistory.objects.filter(request_id=req.id, status="running").exists(),
            timeout=240,
            what="a running stage",
        )
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=240)
        elapsed = time.monotonic() - started
    # Well inside the lease: the stage (3 s) finishes, the run stops on its 1 s budget.
    assert elapsed < 60, f"the cluster took {elapsed:.0f} s to stop"
    after = DeletionRequest.objects.get(id=req.id)
    assert after.lease_owner is None
    assert not StageHistory.objects.filter(request_id=req.id, status="running").exists()
    assert StageHistory.objects.filter(request_id=req.id, status="completed").count() >= 1


def _redis_url() -> str | None:
    import socket

    url = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=1).close()
    except OSError:
        return None
    return url


def test_a_cluster_on_the_redis_broker_runs_the_dispatcher_and_the_deletion() -> None:
    url = _redis_url()
    if url is None:
        if os.environ.get("CI"):
            raise AssertionError("CI machines run Redis on 127.0.0.1:6379; it did not answer")
        pytest.skip("no Redis on 127.0.0.1:6379 (CI has one)")
    import redis

    redis.Redis.from_url(url).flushdb()
    req = submit_and_approve()  # enqueued on the ORM broker of this process: the Redis cluster never sees it
    schedules_due_now()
    with cluster(REDIS_URL=url), cluster(REDIS_URL=url, Q_CLUSTER_NAME="control"):
        wait_for(lambda: status(req.id) == "completed", timeout=240, what="completion over Redis")
    assert StageHistory.objects.filter(request_id=req.id).count() == 6


@pytest.mark.parametrize("target", ["group", "main process"])
def test_run_workers_stops_on_sigterm_within_the_lease_and_releases_it(target: str, observe) -> None:
    """What systemd (KillMode=control-group), Docker and Kubernetes send: SIGTERM to every
    process of the service at once (or to its main process), while a stage runs (a 10 s
    stage, lease 60 s)."""
    req = submit_and_approve()
    with cluster(DELETION_DEMO_STAGE_DELAY_MS="10000", DELETION_TASK_SECONDS="1", command="run_workers") as proc:
        wait_for(
            lambda: StageHistory.objects.filter(request_id=req.id, status="running").exists(),
            timeout=240,
            what="a running stage",
        )
        started = time.monotonic()
        if target == "group":
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=240)
        elapsed = time.monotonic() - started
    assert elapsed < 60, f"the cluster took {elapsed:.0f} s to stop: {err[-2000:]}"
    after = DeletionRequest.objects.get(id=req.id)
    assert after.lease_owner is None, err[-2000:]  # released, not left to expire
    assert after.status in ("running", "approved", "retry_wait"), after.status
    assert not StageHistory.objects.filter(request_id=req.id, status="running").exists()  # a safe point
    observe(f"SIGTERM to the {target}: stopped in {elapsed:.1f} s, lease released, status {after.status}")


def test_sigterm_with_runs_queued_claims_nothing_after_it_and_exits_within_the_lease(observe) -> None:
    """One stage worker busy with a slow stage and runs waiting (one prefetched by the cluster, the
    rest in the queue): after SIGTERM no lease is claimed, the prefetched run goes back to the queue
    untouched, the running one stops at its stage boundary, and the service exits within its lease."""
    reqs = [submit_and_approve(f"demo:queued-{i}") for i in range(4)]
    env = {"Q_WORKERS": "1", "DELETION_DEMO_STAGE_DELAY_MS": "20000", "DELETION_LEASE_SECONDS": "30"}
    with cluster(command="run_workers", **env) as proc:
        wait_for(lambda: LeaseEvent.objects.filter(event="claim").exists(), timeout=240, what="a first claim")
        wait_for(
            lambda: OrmQ.objects.filter(key="backoffice", lock__gt=timezone.now()).count() >= 2,
            timeout=60,
            what="the cluster prefetching a waiting run",
        )
        signalled = timezone.now()
        started = time.monotonic()
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        elapsed = time.monotonic() - started
    assert elapsed < 30, f"the service took {elapsed:.0f} s to stop, past its 30 s lease: {err[-2000:]}"
    late = LeaseEvent.objects.filter(at__gt=signalled, event__in=["claim", "takeover"])
    assert not late.exists(), list(late.values_list("event", "owner", "at"))
    cases = DeletionRequest.objects.filter(id__in=[r.id for r in reqs])
    assert not cases.filter(lease_owner__isnull=False).exists()  # released, not left to expire
    claimed = {e.request_id for e in LeaseEvent.objects.filter(event="claim")}
    untouched = [r for r in cases if r.id not in claimed]
    assert len(claimed) == 1 and len(untouched) == 3 and all(r.status == "approved" for r in untouched)
    assert not StageHistory.objects.filter(request_id__in=[r.id for r in reqs], status="running").exists()
    queued = OrmQ.objects.filter(key="backoffice", lock__lt=timezone.now()).count()  # free to take now
    assert queued >= len(reqs), f"{queued} runs free in the queue: a prefetched or stopped run was lost"
    observe(
        f"SIGTERM with 1 run going and {len(untouched)} waiting: stopped in {elapsed:.1f} s (lease 30 s), "
        f"0 claims after the signal, {queued} runs back in the queue"
    )


def test_a_second_ctrl_c_stops_run_workers_at_once_and_leaves_the_lease_to_expire() -> None:
    """The first Ctrl-C says what it waits for (each worker's current run); the second stops both
    clusters at once: the stage's lease stays held and expires on its own."""
    req = submit_and_approve()
    with cluster(DELETION_DEMO_STAGE_DELAY_MS="120000", command="run_workers") as proc:
        wait_for(
            lambda: StageHistory.objects.filter(request_id=req.id, status="running").exists(),
            timeout=240,
            what="a running stage",
        )
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len([c for c in children if "qcluster" in " ".join(c.cmdline())]) >= 2  # the stage and the control
        proc.send_signal(signal.SIGINT)
        assert proc.stderr is not None
        first = ""
        while "stopping the clusters" not in first:
            first = proc.stderr.readline()
            assert first, "run_workers closed its stderr without a word"
        assert proc.poll() is None, "the first Ctrl-C waits for the running stage (120 s)"
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=60)
        elapsed = time.monotonic() - started
    assert elapsed < 15, f"the second Ctrl-C took {elapsed:.0f} s"
    assert "each running one stops at its next stage boundary" in first and "a second Ctrl-C stops at once" in first, (
        first
    )
    assert "stopping at once; the leases held expire on their own" in rest, rest
    assert not [c.pid for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    held = DeletionRequest.objects.get(id=req.id)
    assert held.lease_owner is not None and held.lease_expires_at is not None
    assert held.lease_expires_at > timezone.now()  # left to expire, not released
