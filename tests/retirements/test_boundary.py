"""Hop 6: the point of no return rechecks everything under locks."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Group

from retirements import notices, watcher
from retirements.models import NoticeSlot, PurgeJob, Workspace
from retirements.store import notices as store_notices
from tests.retirements.helpers import fresh, notice_states, request_at, run_at, subjects
from tests.support import force

pytestmark = pytest.mark.django_db
T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)
ELIGIBLE = T + 30 * DAY


@pytest.fixture
def waiting(hq, make_workspace):
    make_workspace()
    req = request_at(T, hq)
    run_at(T)
    run_at(T + 23 * DAY)
    return req


def fail_sends(monkeypatch, kinds: set[str]) -> list[str]:
    attempts: list[str] = []
    real = notices.send_notice

    def send(letter, *, now, connection=None):
        attempts.append(letter.kind)
        if letter.kind in kinds:
            raise ConnectionError("SMTP server unavailable")
        real(letter, now=now, connection=connection)

    monkeypatch.setattr(notices, "send_notice", send)
    return attempts


def test_undelivered_gating_notice_blocks_then_the_retry_lets_it_proceed(waiting, monkeypatch) -> None:
    attempts = fail_sends(monkeypatch, {"final_warning"})
    run_at(ELIGIBLE)  # final warning (due at -24 h) is sent late and fails
    req = fresh(waiting)
    assert req.status == "waiting" and not PurgeJob.objects.exists()
    assert req.blocker == "gating notice(s) not delivered: final_warning"
    assert req.blocked_until == ELIGIBLE + timedelta(hours=6)
    assert req.next_wake_at == ELIGIBLE + timedelta(minutes=1)  # the notice retry comes first
    assert attempts == ["final_warning"]
    monkeypatch.undo()
    # The retry delivers the final warning a day late: eligibility moves so its 24 h lead holds,
    # never a destruction in the same tick as the warning.
    run_at(ELIGIBLE + timedelta(minutes=1))
    warned = fresh(waiting)
    moved = ELIGIBLE + timedelta(minutes=1, hours=24)
    assert warned.workspace.lifecycle == "deletion_pending" and not PurgeJob.objects.exists()
    assert (warned.status, warned.eligible_at, warned.next_wake_at) == ("waiting", moved, moved)
    assert warned.decisions.filter(action="eligibility_moved").count() == 1
    run_at(moved)
    assert fresh(waiting).workspace.lifecycle == "deleted"
    assert "boundary_wait" in fresh(waiting).decisions.values_list("action", flat=True)


def test_gating_notice_failed_for_good_is_revisited_every_six_hours(waiting) -> None:
    force(NoticeSlot.objects.filter(request=waiting, kind="final_warning"), status="failed", attempts=6)
    run_at(ELIGIBLE)
    req = fresh(waiting)
    assert req.next_wake_at == ELIGIBLE + timedelta(hours=6) and not PurgeJob.objects.exists()
    run_at(ELIGIBLE + timedelta(hours=6))
    assert fresh(waiting).next_wake_at == ELIGIBLE + timedelta(hours=12)
    assert not PurgeJob.objects.exists()


def test_requester_who_lost_staff_status_puts_the_request_on_hold(waiting, hq) -> None:
    run_at(T + 29 * DAY)
    hq.is_staff = False
    hq.save()
    run_at(ELIGIBLE)
    req = fresh(waiting)
    assert req.status == "held" and req.hold_reason == "requester hq-alice is no longer staff"
    assert req.workspace.lifecycle == "deletion_pending" and not PurgeJob.objects.exists()
    assert req.decisions.filter(action="boundary_hold", actor_label="watcher").exists()


def test_requester_who_lost_the_permission_puts_the_request_on_hold(waiting, hq, observe) -> None:
    run_at(T + 29 * DAY)
    Group.objects.filter(user=hq).delete()
    run_at(ELIGIBLE)
    held = fresh(waiting)
    assert held.hold_reason == "requester hq-alice lacks the request_retirement permission"
    assert not PurgeJob.objects.exists()
    observe(f"at the point of no return: {held.status}, '{held.hold_reason}', purge jobs {PurgeJob.objects.count()}")


@pytest.mark.parametrize(
    ("change", "lifecycle_after", "reason"),
    [
        ({"legal_hold": True}, "disabled", "workspace has a legal hold"),
        ({"lifecycle": "active"}, "active", "workspace is active, not deletion_pending"),
        ({"lifecycle": "deleted"}, "deleted", "workspace is deleted, not deletion_pending"),
    ],
)
def test_workspace_changed_meanwhile_settles_without_purge(waiting, change, lifecycle_after, reason) -> None:
    run_at(T + 29 * DAY)
    force(Workspace.objects.filter(id=waiting.workspace_id), **change)  # changed by another system
    run_at(ELIGIBLE)
    req = fresh(waiting)
    assert req.status == "closed" and req.conclusion == f"closed without purge: {reason}"
    assert req.workspace.lifecycle == lifecycle_after
    assert not PurgeJob.objects.exists()
    assert req.watchers.get().status == "settled"


def test_notice_failing_six_times_raises_the_alarm_and_blocks(hq, make_workspace, monkeypatch, caplog, observe) -> None:
    make_workspace()
    req = request_at(T, hq)
    attempts = fail_sends(monkeypatch, {"request_received"})
    at = T
    with caplog.at_level(logging.ERROR, logger="retirements"):
        for _ in range(6):
            run_at(at)
            slot = NoticeSlot.objects.get(request=req, kind="request_received")
            at = slot.next_attempt_at or at
    assert attempts == ["request_received"] * 6
    assert slot.status == "failed" and slot.attempts == 6 and "SMTP server unavailable" in slot.last_error
    alarm = req.alarms.get(kind="notice_failed")
    assert "request_received notice failed 6 times" in alarm.message
    assert any("alarm kind=notice_failed" in r.getMessage() for r in caplog.records)
    run_at(ELIGIBLE - timedelta(hours=24))  # the final warning goes out on time
    run_at(ELIGIBLE)
    assert not PurgeJob.objects.exists() and fresh(req).blocker.startswith("gating notice(s) not delivered")
    observe(
        f"{attempts.count('request_received')} sends of request_received failed: slot {slot.status} after "
        f"{slot.attempts} attempts, alarm {alarm.kind}; "
        f"at eligibility blocked ('{fresh(req).blocker[:40]}'), purge jobs {PurgeJob.objects.count()}"
    )


def test_send_followed_by_failed_save_is_sent_again_once_its_claim_runs_out(
    hq, make_workspace, monkeypatch, settings
) -> None:
    make_workspace()
    req = request_at(T, hq)
    real = store_notices.record_delivered
    calls = {"n": 0}

    def flaky(ids, *, claimer, now):  # the one writer of a delivery, on every path
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("database went away after the send")
        return real(ids, claimer=claimer, now=now)

    monkeypatch.setattr(store_notices, "record_delivered", flaky)
    claim = timedelta(seconds=settings.RETIREMENT_NOTICE_CLAIM_SECONDS)
    run_at(T)  # sent, outcome lost: the step errors and the slot stays claimed
    assert subjects() == ["Retirement requested for workspace acme-old"]
    assert notice_states(req)["request_received"] == "sending"
    run_at(T + claim - timedelta(seconds=1))  # the claim still stands: nobody sends it again
    assert len(subjects()) == 1
    run_at(T + claim)  # the claim ran out: at least once, sent again, now saved
    assert subjects() == ["Retirement requested for workspace acme-old"] * 2
    assert notice_states(req)["request_received"] == "delivered"
    run_at(T + claim + timedelta(minutes=2))  # a delivered slot is never sent again
    assert len(subjects()) == 2


def test_a_case_that_fails_in_a_batch_is_rolled_back_alone_and_stepped_next_tick(
    waiting, hq, make_workspace, monkeypatch, caplog
) -> None:
    """Two cases reach the point of no return in one batch; the first one's recheck raises. Its
    savepoint rolls back alone (still waiting, still due, nothing queued for it), the error is
    logged and said; the other case goes on to its purge in the same tick. The next tick steps
    the failed case again."""
    make_workspace("other-old")
    other = request_at(T, hq, slug="other-old")
    run_at(T)
    run_at(T + 23 * DAY)
    run_at(T + 29 * DAY)
    real = watcher.selectors.undelivered_gating

    def gating(request):
        if request.id == waiting.id:
            raise RuntimeError("the notices' gating could not be read")
        return real(request)

    monkeypatch.setattr(watcher.selectors, "undelivered_gating", gating)
    with caplog.at_level(logging.ERROR, logger="retirements"):
        ran = run_at(ELIGIBLE)
    assert ran["steps"] == {str(waiting.id): "error", str(other.id): "proceed"}
    assert any(f"watcher step failed request={waiting.id}" in r.getMessage() for r in caplog.records)
    failed = fresh(waiting)
    assert (failed.status, failed.workspace.lifecycle) == ("waiting", "deletion_pending")
    assert failed.next_wake_at is not None and failed.next_wake_at <= ELIGIBLE  # still due
    assert not PurgeJob.objects.filter(request=waiting).exists()
    assert fresh(other).workspace.lifecycle == "deleted"
    monkeypatch.undo()
    assert run_at(ELIGIBLE + timedelta(minutes=1))["steps"] == {str(waiting.id): "proceed"}
    assert fresh(waiting).workspace.lifecycle == "deleted"
