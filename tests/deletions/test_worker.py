"""Leases, heartbeats, crashes and races, with real processes, threads and connections."""

from __future__ import annotations

import json
import signal
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.db import connection, connections
from django.utils import timezone
from django.utils.html import escape

from core import grants
from deletions import receiver, targets, worker
from deletions.contract import Believed, StageSnapshot
from deletions.errors import LeaseHeld, StaleLease
from deletions.handlers import RunOptions
from deletions.models import DeletionRequest, StageAttempt, StageHistory
from deletions.retry import plan_failure
from deletions.rules.custody import refused_at_boundary
from deletions.rules.workflow import Plan
from deletions.store import leases, stages
from deletions.targets.base import Found, TargetRefused
from deletions.transition import get_next_stage, next_stage
from tests.conftest import submit_and_approve
from tests.deletions.helpers import (
    believed,
    crash_at,
    current,
    effects,
    recorded,
    running_row,
    show_rows,
    start_worker,
    take_over,
)
from tests.support import race, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_crash_during_handler_resumes_same_row_after_lease_expiry(cmd, observe) -> None:
    req = submit_and_approve()
    proc = start_worker(req.id, "--executor-id", "worker-a", "--stage-delay-ms", "60000")
    row = wait_for(lambda: running_row(req.id), what="gate_user running")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    killed = DeletionRequest.objects.get(id=req.id)
    assert killed.lease_owner == "worker-a" and killed.lease_generation == 1
    assert killed.status == "running"

    early = cmd("run_deletion", str(req.id), "--executor-id", "worker-b")
    assert early.code == 1 and "is leased by worker-a (generation 1)" in early.err

    assert killed.lease_expires_at is not None
    with time_machine.travel(killed.lease_expires_at + timedelta(seconds=1), tick=False):
        ran = cmd("run_deletion", str(req.id), "--executor-id", "worker-b")
    assert ran.code == 0, ran.err
    request, rows, _ = show_rows(req.id)
    assert request["status"] == "completed" and request["lease_generation"] == 2
    resumed = StageHistory.objects.get(id=row.id)
    assert resumed.status == "completed" and resumed.started_at == row.started_at and resumed.attempts == 2
    assert len(rows) == 6 and sum(r["stage"] == "gate_user" for r in rows) == 1
    assert {g for _, _, g in effects(req.id)} == {2}
    observe(
        f"SIGKILL mid-{row.stage}; competitor refused while leased; after expiry worker-b (generation 2) resumed "
        f"row {str(row.id)[:8]} (attempts {resumed.attempts}, first start kept); 6 effects, all generation 2"
    )


def test_crash_before_first_transition_initializes_on_takeover(cmd, observe) -> None:
    req = submit_and_approve()
    crashed = crash_at("after-claim", req.id)
    assert crashed.status == "approved" and not StageHistory.objects.filter(request_id=req.id).exists()
    ran = take_over(cmd, crashed, "--next-step")
    assert ran.code == 0, ran.err
    _, rows, _ = show_rows(req.id)
    assert [r["stage"] for r in rows if not r["is_current"]] == ["gate_user"]
    after = DeletionRequest.objects.get(id=req.id)
    observe(
        f"killed after claim (generation {crashed.lease_generation}): status {crashed.status}, 0 stages; takeover "
        f"(generation {after.lease_generation}) initialized {rows[0]['stage']}; effects at receiver: "
        f"{len(effects(req.id))}"
    )


def test_crash_after_saved_success_does_not_rerun_the_handler(cmd, observe) -> None:
    """The seed's "after saved success, before transition" point. On the common path the result is saved
    with the next step in one transaction (`stages.save_and_advance`), so a crash leaves the row submitted
    (killed after the effect: the takeover looks it up) or its successor current, never between; the state
    is still met where the step is refused after the save. Made here as that save alone leaves it (the
    receiver's own record, saved by the engine's `save_result` statement, with no step): the takeover
    advances from the saved result without running the gate again."""
    req = submit_and_approve()
    crashed = crash_at("after-effect", req.id)
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    assert gate.status == "running" and gate.submitted_at is not None and crashed.status == "running"
    found = targets.for_target(req.target).lookup(gate.operation_id)
    assert isinstance(found, Found), found  # the receiver's own record of the gate
    with connection.cursor() as cur:
        stages.SQL.one(
            cur,
            "save_result",
            request_id=req.id,
            owner=crashed.lease_owner,
            generation=crashed.lease_generation,
            stage_id=gate.id,
            now=timezone.now(),
            result=json.dumps(found.evidence),
            action="completed",
            prefix=None,
            incarnation=None,
            applied=None,
        )
    gate = StageHistory.objects.get(id=gate.id)
    _, rows, _ = show_rows(req.id)
    assert current(rows) == [("gate_user", None, "completed")]
    assert "decision" not in gate.metadata_json and [a for _, a, _ in effects(req.id)] == ["gate_user"]
    ran = take_over(cmd, crashed, "--next-step")
    assert ran.code == 0, ran.err
    gate_after = StageHistory.objects.get(id=gate.id)
    assert gate_after.attempts == 1 and gate_after.metadata_json["result"] == gate.metadata_json["result"]
    assert not gate_after.is_current and gate_after.metadata_json["decision"]["transition"] == "enter_communities"
    applied = [a for _, a, _ in effects(req.id)]
    assert applied == ["gate_user", "purge_db"], applied  # the gate once, then its successor
    observe(
        f"killed after gate_user's result was saved: gate {gate.status}+current, request {crashed.status}, "
        f"decision saved: {'decision' in gate.metadata_json}; takeover (--next-step, exit {ran.code}) advanced "
        f"from the saved result: gate attempts {gate_after.attempts}, decision "
        f"{gate_after.metadata_json['decision']['transition']}, effects at receiver {applied}"
    )


def test_crash_after_effect_before_save_settles_from_the_target_system(cmd, observe) -> None:
    req = submit_and_approve()
    crashed = crash_at("after-effect", req.id)
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    assert gate.status == "running" and gate.is_current
    assert len(effects(req.id)) == 1
    ran = take_over(cmd, crashed)
    assert ran.code == 0, ran.err
    gate_after = StageHistory.objects.get(id=gate.id)
    assert gate_after.status == "completed" and gate_after.attempts == 2
    ops = [op for op, _, _ in effects(req.id)]
    assert len(ops) == len(set(ops)) == StageHistory.objects.filter(request_id=req.id).count()
    assert recorded(gate.operation_id) == believed(gate_after.metadata_json["result"])
    observe(
        f"killed after the effect; attempt {gate_after.attempts} found operation {str(gate.operation_id)[:8]} at "
        f"the target and saved it; effects at receiver: {len(ops)}, each once"
    )


def test_crash_after_transition_commit_returns_the_saved_successor(cmd, observe) -> None:
    req = submit_and_approve()
    crashed = crash_at("after-transition", req.id)
    _, rows, _ = show_rows(req.id)
    assert current(rows) == [("purge_db", "00000000-0000-0000-0000-00000000000b", "pending")]
    successor_id = next(r["id"] for r in rows if r["is_current"])
    ran = take_over(cmd, crashed, "--next-step")
    assert ran.code == 0, ran.err
    assert StageHistory.objects.get(id=successor_id).status == "completed"
    assert StageHistory.objects.filter(request_id=req.id, stage="gate_user").count() == 1
    successor = StageHistory.objects.get(id=successor_id)
    observe(
        f"killed after commit; takeover ran the saved successor {successor.stage} ({successor.status}); gate rows: "
        f"{StageHistory.objects.filter(request_id=req.id, stage='gate_user').count()}"
    )


def test_heartbeat_advances_during_a_long_handler_and_competitor_is_refused(settings, cmd) -> None:
    """No wall-clock window: the handler runs until the test has seen three heartbeats, however slow the machine."""
    settings.DELETION_HEARTBEAT_SECONDS = 0.2
    req = submit_and_approve()
    outcome: dict[str, Any] = {}
    stop = threading.Event()

    def long_run() -> None:
        try:
            outcome["result"] = worker.run(
                req.id, executor_id="worker-a", next_step=True, options=RunOptions(stage_delay_ms=600_000), stop=stop
            )
        except Exception as exc:
            outcome["result"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=long_run)
    thread.start()
    wait_for(lambda: running_row(req.id), what="gate_user running")
    seen: set[Any] = set()

    def beats() -> bool:
        seen.add(DeletionRequest.objects.values_list("heartbeat_at", flat=True).get(id=req.id))
        return len(seen) >= 3

    wait_for(beats, timeout=120, what="three heartbeats during one handler")
    with pytest.raises(LeaseHeld, match="leased by worker-a"):
        worker.run(req.id, executor_id="worker-b")
    stop.set()  # Ctrl-C: the handler stops, the heartbeat is joined, the lease released, the row stays current
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert "the lease of worker-a is released" in str(outcome["result"])
    after = DeletionRequest.objects.get(id=req.id)
    assert after.lease_owner is None and running_row(req.id) is not None
    assert not [t for t in threading.enumerate() if t.name.startswith("heartbeat-")]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_handler_releases_lease_and_keeps_row_current(sig: signal.Signals) -> None:
    req = submit_and_approve()
    proc = start_worker(req.id, "--executor-id", "worker-a", "--stage-delay-ms", "60000")
    row = wait_for(lambda: running_row(req.id), what="gate_user running")
    started = time.monotonic()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert time.monotonic() - started < 45  # well inside the 60 s stage: the signal cut it short
    assert proc.returncode == 1, err
    assert "stopped during gate_user; the row stays current; the lease of worker-a is released" in err
    after = DeletionRequest.objects.get(id=req.id)
    assert after.lease_owner is None and after.lease_expires_at is None
    kept = StageHistory.objects.get(id=row.id)
    assert kept.is_current and kept.status == "running"


def test_stale_generation_writes_are_rejected(observe) -> None:
    req = submit_and_approve()
    t0 = timezone.now()
    old = leases.claim(request_id=req.id, owner="worker-a", now=t0, lease_seconds=60)
    row = get_next_stage(old, None, now=t0)
    assert isinstance(row, StageSnapshot)
    later = t0 + timedelta(seconds=61)
    new = leases.claim(request_id=req.id, owner="worker-b", now=later, lease_seconds=60)
    assert new.generation == old.generation + 1
    target = targets.for_target(req.target)
    plan = Plan.of(req.inventory_json, req.inventory_digest)
    target.apply(receiver.grant(new, row, plan, now=later).token)  # the target's fence is 2 now
    snapshot = show_rows(req.id)

    assert leases.heartbeat(old, now=later, lease_seconds=60) is False
    assert leases.release(old, now=later) is False
    for write in (
        lambda: stages.begin(old, row, now=later, submit=True),
        lambda: stages.submit(old, row.id, now=later),
        # the result saved with the next step: the save is fenced, so neither is written
        lambda: next_stage(old, plan, Believed(row, {"gated": True}), now=later),
        lambda: stages.fail(
            old,
            row.id,
            "boom",
            now=later,
            plan=lambda n, owner: plan_failure(
                failures=n, owner=owner, stage=row.stage, error="boom", open_question="", now=later
            ),
        ),
        lambda: stages.set_aside(
            old,
            row.id,
            "probe",
            review=True,
            custody=refused_at_boundary(rule="probe", now=later),
            approval_id=None,
            now=later,
        ),
        lambda: get_next_stage(old, row.id, now=later),
        lambda: next_stage(old, plan, None, now=later),
    ):
        with pytest.raises(StaleLease, match="generation 1 is stale"):
            write()
    # A grant minted for generation 1 before the takeover is refused where the effect lands.
    old_grant = grants.sign({**receiver.grant(new, row, plan, now=later).payload, "generation": 1})
    with pytest.raises(TargetRefused, match="generation 2 owns request") as refused:
        target.apply(old_grant)
    assert refused.value.kind == "stale"
    assert show_rows(req.id) == snapshot
    assert leases.heartbeat(new, now=later, lease_seconds=60) is True
    observe(
        f"generation {old.generation} refused for heartbeat, release, status, result, failure, transition and at "
        f"the target; generation {new.generation} still renews; rows unchanged"
    )


def test_two_workers_at_the_same_instant_only_one_runs_handlers(observe) -> None:
    req = submit_and_approve()
    results = race(2, lambda i: worker.run(req.id, executor_id=f"worker-{i}"))
    winners = [r for r in results if isinstance(r, worker.RunOutcome)]
    losers = [r for r in results if isinstance(r, LeaseHeld)]
    assert len(winners) == 1 and len(losers) == 1, results
    assert winners[0].handlers_run == 6
    ops = effects(req.id)
    assert len(ops) == 6 and len({op for op, _, _ in ops}) == 6
    assert DeletionRequest.objects.get(id=req.id).lease_generation == 1
    observe(f"2 threads: 1 ran 6 handlers, 1 refused ({losers[0].message[:40]}...)")


def test_two_worker_processes_at_the_same_instant_only_one_runs_handlers(observe) -> None:
    req = submit_and_approve()
    procs = [start_worker(req.id, "--executor-id", f"proc-{i}") for i in range(2)]
    errs = " ".join(p.communicate(timeout=60)[1] for p in procs)
    codes = sorted(p.returncode for p in procs)
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    ops = effects(req.id)
    assert len(ops) == len({op for op, _, _ in ops}) == 6
    # Either the second arrived while the lease was live (refused, exit 1) or after the
    # first finished (read-only rerun, exit 0); never a second execution.
    assert codes in ([0, 0], [0, 1]), errs
    observe(
        f"2 processes exited {codes}; effects at receiver: {len(ops)}, "
        f"distinct operations {len({op for op, _, _ in ops})}"
    )


def test_two_replacement_workers_racing_after_expiry_only_one_takes_over(observe) -> None:
    req = submit_and_approve()
    t0 = timezone.now()
    gone = leases.claim(request_id=req.id, owner="lost-worker", now=t0, lease_seconds=60)
    get_next_stage(gone, None, now=t0)  # it started, then vanished
    with time_machine.travel(t0 + timedelta(seconds=61), tick=True):
        results = race(2, lambda i: worker.run(req.id, executor_id=f"replacement-{i}"))
    winners = [r for r in results if isinstance(r, worker.RunOutcome)]
    assert len(winners) == 1 and [type(r) for r in results if not isinstance(r, worker.RunOutcome)] == [LeaseHeld]
    from deletions.models import LeaseEvent

    takeovers = list(LeaseEvent.objects.filter(request_id=req.id, event="takeover"))
    assert len(takeovers) == 1 and takeovers[0].previous_owner == "lost-worker"
    ops = effects(req.id)
    assert len(ops) == len({op for op, _, _ in ops}) == 6 and {g for _, _, g in ops} == {2}
    # The lost worker coming back late is fenced out everywhere.
    with pytest.raises(StaleLease):
        get_next_stage(gone, None, now=t0 + timedelta(seconds=120))
    observe(
        f"{len(takeovers)} takeover from {takeovers[0].previous_owner}, the other replacement refused; "
        f"effects at receiver: {len(ops)}, generations {sorted({g for _, _, g in ops})}"
    )


def test_crash_after_the_terminal_commit_reruns_read_only(cmd, observe) -> None:
    req = submit_and_approve()
    crashed = crash_at("after-terminal-commit", req.id)
    # The completing transaction released the lease with it: nothing is left held by the dead worker.
    assert crashed.status == "completed" and crashed.lease_owner is None
    events = list(crashed.lease_events.order_by("id").values_list("event", "owner"))
    assert events == [("claim", "worker-a"), ("release", "worker-a")]
    from tests.deletions.helpers import all_rows

    before = all_rows()
    ran = cmd("run_deletion", str(req.id), "--executor-id", "worker-b")
    assert ran.code == 0 and "already completed" in ran.out, ran.err
    assert all_rows() == before
    observe(
        f"killed after the terminal commit (status {crashed.status}, lease released in it); "
        f"rerun exit {ran.code}, {len(effects(req.id))} effects, every row unchanged"
    )


def test_a_worker_paused_past_its_lease_is_rejected_where_the_effect_lands(cmd, observe, admin_client) -> None:
    """SIGSTOP holding a signed grant; a replacement takes over; SIGCONT: the target refuses the original."""
    import psutil

    req = submit_and_approve()
    original = start_worker(req.id, "--executor-id", "worker-a", PAUSE_AT="after-grant")
    proc = psutil.Process(original.pid)
    wait_for(lambda: proc.status() == psutil.STATUS_STOPPED, what="worker-a paused holding its grant")
    paused = DeletionRequest.objects.get(id=req.id)
    assert paused.lease_expires_at is not None
    with time_machine.travel(paused.lease_expires_at + timedelta(seconds=1), tick=False):
        replaced = cmd("run_deletion", str(req.id), "--executor-id", "worker-b")
    # worker-b looks the submitted operation up: not found as of a watermark past the submission, so it
    # was not applied; worker-b sends it under the same operation id and finishes the request.
    assert replaced.code == 0, replaced.err
    taken = DeletionRequest.objects.get(id=req.id)
    assert taken.status == "completed" and taken.lease_generation == 2
    applied = effects(req.id)
    original.send_signal(signal.SIGCONT)
    _, err = original.communicate(timeout=120)
    # worker-a's grant (generation 1, signed before it paused) reaches the target, which refuses it.
    assert original.returncode == 1 and "stale" in err, err
    assert effects(req.id) == applied and len({op for op, _, _ in applied}) == len(applied) == 6
    assert {g for _, _, g in applied} == {2}
    # worker-a could record nothing on the case, but the receiver's reason is kept on its own attempt
    # and read on the case page.
    mine = StageAttempt.objects.get(request_id=req.id, executor="worker-a", generation=1)
    assert mine.outcome == "interrupted" and mine.error.startswith("after its lease was taken over: refused by")
    assert "stale" in mine.error and "generation 1" in mine.error, mine.error
    page = admin_client.get(f"/admin/deletions/deletionrequest/{req.id}/change/").content.decode()
    assert escape(mine.error) in page
    observe(
        f"worker-a SIGSTOPped holding a signed grant, worker-b took generation {taken.lease_generation} and "
        f"completed; worker-a resumed: exit {original.returncode}, refused at the target as stale; "
        f"effects at receiver: {len(applied)}, all generation 2, each once"
    )


def test_one_heartbeat_thread_renews_every_run_of_its_process_and_stops_only_the_lost_one() -> None:
    """Two runs of one process share one heartbeat thread: both leases are renewed; the one taken
    over is stopped and marked lost while the other goes on; a run let go is renewed no more."""
    first, second, third = (submit_and_approve(target=f"manual:hb-{n}") for n in range(3))
    now = timezone.now()
    lease_a, lease_b, lease_c = (
        leases.claim(request_id=r.id, owner=f"worker-{r.target}", now=now, lease_seconds=60)
        for r in (first, second, third)
    )
    beats = worker.Heartbeats()
    before = {t for t in threading.enumerate() if t.name == "lease-heartbeat"}
    stops = [threading.Event() for _ in range(3)]
    held_a = beats.hold(lease_a, stops[0], 0.05, 60)
    held_b = beats.hold(lease_b, stops[1], 0.05, 60)

    def expiry(request: DeletionRequest) -> Any:
        return DeletionRequest.objects.values_list("lease_expires_at", flat=True).get(id=request.id)

    wait_for(lambda: expiry(first) > now + timedelta(seconds=60), what="the first run's lease renewed")
    wait_for(lambda: expiry(second) > now + timedelta(seconds=60), what="the second run's lease renewed")
    assert len({t for t in threading.enumerate() if t.name == "lease-heartbeat"} - before) == 1
    leases.claim(request_id=second.id, owner="thief", now=now + timedelta(seconds=61), lease_seconds=60)
    assert held_b.lost.wait(timeout=120) and stops[1].is_set()
    renewed = expiry(first)
    wait_for(lambda: expiry(first) > renewed, what="the first run renewed after the second was lost")
    assert not stops[0].is_set() and not held_a.lost.is_set()
    beats.let_go(held_a)
    let_go_at = expiry(first)
    held_c = beats.hold(lease_c, stops[2], 0.05, 60)
    seen = expiry(third)
    wait_for(lambda: expiry(third) > seen, what="a later run renewed")
    seen = expiry(third)
    wait_for(lambda: expiry(third) > seen, what="a later run renewed twice")
    assert expiry(first) == let_go_at  # the thread went round twice and left the let-go lease alone
    beats.let_go(held_c)
    assert len({t for t in threading.enumerate() if t.name == "lease-heartbeat"} - before) <= 1
