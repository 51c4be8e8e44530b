"""Withdrawn authority reaches the target system: a revocation or a cancellation is pushed there,
acknowledged, shown on the case, and from then on a grant minted before it is refused where the
effect lands."""

from __future__ import annotations

import json
import signal
from datetime import timedelta

import psutil
import pytest
import time_machine
from django.db import connections
from django.test import Client

from deletions import tasks
from deletions.models import AuthorityWithdrawal, DeletionRequest, StageAttempt
from tests.conftest import submit_and_approve
from tests.deletions.helpers import TargetStopped, effects, start_worker
from tests.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def min_epoch(request_id) -> int | None:
    with connections["target"].cursor() as cur:
        cur.execute("SELECT min_epoch FROM receiver.receiver_fences WHERE request_id = %s", [request_id])
        row = cur.fetchone()
    return row[0] if row else None


def paused_holding_a_grant(target: str):
    req = submit_and_approve(target)
    worker = start_worker(req.id, "--executor-id", "worker-a", PAUSE_AT="after-grant")
    proc = psutil.Process(worker.pid)
    wait_for(lambda: proc.status() == psutil.STATUS_STOPPED, what="worker-a paused holding its grant")
    return req, worker


def test_a_revocation_acknowledged_by_the_target_refuses_a_grant_minted_before(cmd, observe) -> None:
    req, worker = paused_holding_a_grant("demo:revoked-late")
    revoked = cmd("revoke_approval", str(req.id), "--by", "operator-c", "--reason", "the customer withdrew")
    assert revoked.code == 0, revoked.err
    # Told to the target on commit, and acknowledged there.
    w = AuthorityWithdrawal.objects.get(request_id=req.id)
    assert (w.epoch, w.cause, w.attempts) == (1, "approval revoked by operator-c", 1)
    assert w.acknowledged_at is not None and "demo target system at http" in w.acknowledged_where
    assert min_epoch(req.id) == 1
    worker.send_signal(signal.SIGCONT)
    _, err = worker.communicate(timeout=120)
    # The grant worker-a held (epoch 0) reached the target after the acknowledgement: refused there.
    assert worker.returncode == 1 and "back in review" in err, err
    assert effects(req.id) == []
    case = DeletionRequest.objects.get(id=req.id)
    assert case.status == "needs_review" and case.open_question.startswith("approval revoked at"), case.open_question
    attempt = StageAttempt.objects.get(request_id=req.id)
    assert attempt.outcome == "refused" and "withdrawn (epoch 1" in attempt.error, attempt.error
    shown = json.loads(cmd("show_deletion", str(req.id), "--json").out)["withdrawals"]
    assert shown == [
        {
            "epoch": 1,
            "cause": "approval revoked by operator-c",
            "created_at": w.created_at.isoformat(),
            "acknowledged_at": w.acknowledged_at.isoformat(),
            "acknowledged_where": w.acknowledged_where,
            "attempts": 1,
            "last_error": "",
        }
    ]
    took = (w.acknowledged_at - w.created_at).total_seconds() * 1000
    observe(
        f"worker-a SIGSTOPped holding a signed grant; the revocation was acknowledged by the target "
        f"{took:.0f} ms after it was recorded; worker-a resumed: refused at the target ({attempt.error[:60]}…), "
        f"{len(effects(req.id))} effects, case {case.status}"
    )


def test_a_cancellation_overtakes_a_grant_and_ends_the_case_before_any_effect(cmd, observe) -> None:
    req, worker = paused_holding_a_grant("demo:cancelled-late")
    cancelled = cmd("cancel_deletion", str(req.id), "--by", "operator-c", "--reason", "duplicate request")
    assert cancelled.code == 0, cancelled.err
    assert AuthorityWithdrawal.objects.get(request_id=req.id).acknowledged_at is not None
    worker.send_signal(signal.SIGCONT)
    out, err = worker.communicate(timeout=120)
    assert worker.returncode == 1 and "request cancelled" in out + err, err
    assert effects(req.id) == []
    case = DeletionRequest.objects.get(id=req.id)
    assert case.status == "cancelled" and "cancelled before any effect" in case.last_action, case.last_action
    assert not case.stages.filter(status="running").exists()
    observe(f"cancel acknowledged by the target, worker-a resumed: {len(effects(req.id))} effects; {case.last_action}")


def test_a_withdrawal_the_target_cannot_take_now_is_retried_until_acknowledged(cmd, admin_client: Client) -> None:
    from core.authority import named
    from deletions.services import deletion_revoke_approval

    req = submit_and_approve("demo:unreachable")
    with TargetStopped():
        deletion_revoke_approval(actor=named("operator-c"), request_id=req.id, reason="wrong person")
        w = AuthorityWithdrawal.objects.get(request_id=req.id)
        assert w.acknowledged_at is None and w.attempts == 1 and "did not answer" in w.last_error, w.last_error
        page = admin_client.get(f"/admin/deletions/deletionrequest/{req.id}/change/").content.decode()
        assert "not yet</strong>: 1 attempt" in page and "did not answer" in page
        with time_machine.travel(w.created_at + timedelta(minutes=3)):
            late = cmd("health", "--json")
        assert late.code == 1 and json.loads(late.out)["checks"]["withdrawals_unacknowledged"] == {
            "ok": False,
            "count": 1,
        }
        tasks.dispatch()  # the next tick: still unreachable, kept
        assert AuthorityWithdrawal.objects.get(id=w.id).attempts == 2
    tasks.dispatch()  # the target takes connections again
    w.refresh_from_db()
    assert w.acknowledged_at is not None and w.attempts == 3 and w.last_error == ""
    assert min_epoch(req.id) == 1
    assert json.loads(cmd("health", "--json").out)["checks"]["withdrawals_unacknowledged"]["ok"]


def test_an_approver_losing_the_permission_withdraws_authority_at_the_next_tick(cmd, observe) -> None:
    from django.contrib.auth.models import Group, User

    req, worker = paused_holding_a_grant("demo:lost-permission")
    approver = User.objects.get(username="operator-b")
    approver.groups.remove(Group.objects.get(name="approvers"))
    tasks.dispatch()  # the dispatcher's tick finds it, withdraws and tells the target
    w = AuthorityWithdrawal.objects.get(request_id=req.id)
    assert w.cause == "approver operator-b no longer holds deletions.approve_deletionrequest", w.cause
    assert w.acknowledged_at is not None and min_epoch(req.id) == 1
    tasks.dispatch()  # once per approval: the next tick adds nothing
    assert AuthorityWithdrawal.objects.filter(request_id=req.id).count() == 1
    worker.send_signal(signal.SIGCONT)
    _, err = worker.communicate(timeout=120)
    assert effects(req.id) == []
    case = DeletionRequest.objects.get(id=req.id)
    assert case.status == "needs_review" and "approver operator-b is no longer" in case.open_question, err
    observe(f"approver lost the permission while a grant was in flight: {w.cause}; the grant refused at the target")


def test_a_withdrawal_is_not_a_grant_and_a_grant_is_not_a_withdrawal() -> None:
    """The target tells the two signed kinds apart: neither is accepted as the other."""
    from core import grants
    from deletions.targets import for_target
    from deletions.targets.base import TargetRefused

    target = for_target("demo:kinds")
    req = submit_and_approve("demo:kinds")
    withdrawal = grants.sign({"kind": "withdrawal", "request_id": str(req.id), "epoch": 5, "issued_at": "x"})
    with pytest.raises(TargetRefused) as as_grant:
        target.apply(withdrawal)
    assert as_grant.value.kind == "tampered" and "not a grant" in as_grant.value.message
    grant = grants.sign({"kind": "grant", "request_id": str(req.id), "epoch": 5})
    with pytest.raises(TargetRefused) as as_withdrawal:
        target.withdraw(grant)
    assert as_withdrawal.value.kind == "tampered" and "not a withdrawal" in as_withdrawal.value.message
    assert min_epoch(req.id) is None and effects(req.id) == []
