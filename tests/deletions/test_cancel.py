"""Cancellation: outright before the first stage, at a stage boundary once running."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from core.authority import named
from deletions import worker
from deletions.errors import Refused
from deletions.models import DeletionRequest, StageHistory
from deletions.services import deletion_cancel
from deletions.store import leases
from tests.conftest import submit_and_approve
from tests.deletions.helpers import effects
from tests.support import race

pytestmark = pytest.mark.django_db(transaction=True)


def test_cancel_before_first_stage_cancels_outright(cmd) -> None:
    req = submit_and_approve()
    ran = cmd("cancel_deletion", str(req.id), "--by", "operator-c", "--reason", "customer withdrew")
    assert ran.code == 0, ran.err
    after = DeletionRequest.objects.get(id=req.id)
    assert after.status == "cancelled" and after.cancel_reason == "customer withdrew"
    assert after.cancel_requested_by == "operator-c"
    assert not StageHistory.objects.filter(request_id=req.id).exists()


def test_cancel_while_a_worker_runs_blocks_the_pending_effect_and_stops(settings, monkeypatch, observe) -> None:
    """The worker is held just before the receiver (an event, not a timing window) while the cancel is recorded."""
    from deletions import handlers

    settings.DELETION_HEARTBEAT_SECONDS = 0.2
    req = submit_and_approve()
    outcome: dict[str, Any] = {}
    reached, go = threading.Event(), threading.Event()
    grant = handlers.receiver.grant

    def held_grant(*args: Any, **kwargs: Any) -> Any:
        reached.set()
        assert go.wait(timeout=120), "the test never let the worker submit"
        return grant(*args, **kwargs)

    monkeypatch.setattr(handlers.receiver, "grant", held_grant)

    def run() -> None:
        try:
            outcome["r"] = worker.run(req.id, executor_id="worker-a")
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    assert reached.wait(timeout=120), "the worker never reached its submission"
    recorded = deletion_cancel(request_id=req.id, actor=named("operator-c"), reason="legal asked to stop")
    # Its submission had begun: the cancel is saved without claiming the effect was prevented.
    assert recorded.status == "running" and "is being looked up before it ends" in recorded.last_action
    go.set()
    thread.join(timeout=120)
    assert outcome["r"].exit_code == 1
    assert "0 completed stage(s) are done and were not undone" in outcome["r"].message
    after = DeletionRequest.objects.get(id=req.id)
    assert after.status == "cancelled" and after.lease_owner is None
    rows = list(StageHistory.objects.filter(request_id=req.id))
    # The receiver refused the in-flight effect: nothing applied, and nothing is reported as done.
    assert [(r.stage, r.status, r.submitted_at) for r in rows] == [("gate_user", "pending", None)]
    assert effects(req.id) == []
    refusal = after.decisions.get(action="boundary_refused")
    assert "request cancelled" in refusal.reason and refusal.generation == 1
    observe(
        f"cancel recorded mid-stage; the receiver refused the pending effect (effects at receiver: "
        f"{len(effects(req.id))}); request {after.status}, {len(rows)} stage row left pending"
    )


def test_cancel_during_retry_wait_keeps_completed_stages(cmd, observe) -> None:
    req = submit_and_approve()
    assert cmd("run_deletion", str(req.id), "--fail-stage", "purge_db").code == 1
    ran = cmd("cancel_deletion", str(req.id), "--by", "operator-c", "--reason", "duplicate request")
    assert ran.code == 0, ran.err
    after = DeletionRequest.objects.get(id=req.id)
    assert after.status == "cancelled" and "1 completed stage(s) stay done" in after.last_action
    assert StageHistory.objects.get(request_id=req.id, stage="gate_user").status == "completed"
    observe(
        f"cancelled while waiting to retry: {after.status}, '{after.last_action[-40:]}'; "
        f"effects at receiver: {len(effects(req.id))}"
    )


def test_cancellation_and_claim_race_exactly_one_wins(observe) -> None:
    winners = []
    for n in range(5):
        req = submit_and_approve(f"demo:race-{n}")

        def contender(i: int, rid: Any = req.id) -> Any:
            if i == 0:
                return deletion_cancel(request_id=rid, actor=named("operator-c"), reason="race")
            return leases.claim(request_id=rid, owner="worker-a", now=timezone.now(), lease_seconds=60)

        cancel_result, claim_result = race(2, contender)
        after = DeletionRequest.objects.get(id=req.id)
        winners.append("cancel" if isinstance(claim_result, Refused) else "claim")
        if isinstance(claim_result, Refused):
            # Cancellation won: the request is cancelled and the claim was refused.
            assert after.status == "cancelled" and after.lease_owner is None
        else:
            # The worker won: cancellation is only recorded; the worker stops at its next transition.
            assert after.status == "approved" and after.lease_owner == "worker-a"
            assert after.cancel_requested_at is not None
            assert not isinstance(cancel_result, Exception)
    observe(f"5 races, exactly one winner each: {', '.join(winners)}")
