"""Hop 5: hold, release, cancel; every inapplicable repeat is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core import mail

from core.authority import Actor
from core.errors import Refused
from retirements.models import PurgeJob
from retirements.services import retirement_cancel, retirement_hold, retirement_release
from tests.retirements.conftest import make_staff, retirement_rows
from tests.retirements.helpers import fresh, notice_states, request_at, run_at

pytestmark = pytest.mark.django_db
T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)
HOUR, MINUTE = timedelta(hours=1), timedelta(minutes=1)


def at(when, fn, **kw):
    with time_machine.travel(when, tick=False):
        return fn(**kw)


def test_hold_stops_destruction_and_release_extends_eligibility(hq, other_staff, make_workspace) -> None:
    make_workspace()
    req = request_at(T, hq)
    run_at(T)
    at(T + 10 * DAY, retirement_hold, actor=Actor.of(other_staff), request_id=req.id, reason="customer disputes")
    held = fresh(req)
    assert held.status == "held" and held.next_wake_at is None and held.owner == other_staff

    run_at(T + 31 * DAY)  # well past the original eligibility: nothing happens
    assert not PurgeJob.objects.exists() and fresh(req).status == "held"
    # The reminder is not sent while held; the hold's own staff notice is.
    assert [m.subject for m in mail.outbox] == [
        "Retirement requested for workspace acme-old",
        "Retirement of workspace acme-old is on hold",
    ]

    at(T + 31 * DAY, retirement_release, actor=Actor.of(other_staff), request_id=req.id, reason="owner confirmed")
    released = fresh(req)
    assert released.status == "waiting"
    assert released.eligible_at == T + 51 * DAY  # extended by the 21 days on hold
    assert released.last_action == "released by hq-bob after 21 d on hold; eligible at 2027-01-21 09:00:00 UTC"
    due = dict(req.notices.values_list("kind", "due_at"))
    assert due["reminder_7_days"] == T + 44 * DAY and due["final_warning"] == T + 50 * DAY
    assert released.next_wake_at == T + 44 * DAY
    run_at(T + 31 * DAY)  # the release's own staff notice goes at once
    assert mail.outbox[-1].subject.startswith("Retirement of workspace acme-old is released; eligible after")
    assert fresh(req).next_wake_at == T + 44 * DAY

    run_at(T + 50 * DAY)
    assert not PurgeJob.objects.exists()
    run_at(T + 51 * DAY)
    assert fresh(req).workspace.lifecycle == "deleted"
    assert list(fresh(req).decisions.values_list("action", flat=True)) == [
        "request",
        "hold",
        "release",
        "point_of_no_return",
        "purged",
    ]


def test_cancel_restores_disabled_and_suppresses_notices(hq, make_workspace, cmd) -> None:
    make_workspace()
    req = request_at(T, hq)
    run_at(T)
    with time_machine.travel(T + 2 * DAY, tick=False):
        ran = cmd("cancel_retirement", str(req.id), "--by", "hq-alice", "--reason", "workspace sold instead")
    assert ran.code == 0, ran.err
    after = fresh(req)
    assert after.status == "cancelled" and after.workspace.lifecycle == "disabled"
    assert notice_states(req) == {
        "request_received": "delivered",
        "reminder_7_days": "suppressed",
        "final_warning": "suppressed",
        "cancelled": "pending",  # the cancellation's own staff notice, sent by the next tick
    }
    run_at(T + 2 * DAY)
    assert notice_states(req)["cancelled"] == "delivered"
    assert mail.outbox[-1].subject == "Retirement of workspace acme-old is cancelled; the workspace is disabled again"
    assert after.watchers.get().status == "settled"
    run_at(T + 40 * DAY)
    assert len(mail.outbox) == 2 and not PurgeJob.objects.exists()  # nothing more after the cancellation


def test_inapplicable_repeats_are_refused_and_change_nothing(hq, make_workspace, cmd) -> None:
    make_workspace()
    req = request_at(T, hq)
    rid = str(req.id)

    def refused(message: str, *args: str) -> None:
        before = retirement_rows()
        ran = cmd(*args)
        assert ran.code == 1, ran.err
        assert message in ran.err
        assert retirement_rows() == before

    refused("not held: request", "release_retirement", rid, "--by", "hq-alice", "--reason", "r")
    assert cmd("hold_retirement", rid, "--by", "hq-alice", "--reason", "check contract").code == 0
    refused("already held by hq-alice", "hold_retirement", rid, "--by", "hq-alice", "--reason", "again")
    assert cmd("cancel_retirement", rid, "--by", "hq-alice", "--reason", "not needed").code == 0
    refused("is already cancelled", "cancel_retirement", rid, "--by", "hq-alice", "--reason", "again")
    refused("is already cancelled", "hold_retirement", rid, "--by", "hq-alice", "--reason", "again")
    refused("is already cancelled", "release_retirement", rid, "--by", "hq-alice", "--reason", "r")


def test_decisions_after_the_point_of_no_return_are_refused(hq, make_workspace, cmd) -> None:
    make_workspace()
    req = request_at(T, hq)
    run_at(T)
    run_at(T + 29 * DAY)  # the final warning, on time
    with time_machine.travel(T + 30 * DAY, tick=False):
        from retirements.watcher import step

        assert req.watcher_id is not None
        step(req.watcher_id, now=T + 30 * DAY)
    assert fresh(req).status == "executing"
    for args in (
        ("hold_retirement", str(req.id), "--by", "hq-alice", "--reason", "stop!"),
        ("cancel_retirement", str(req.id), "--by", "hq-alice", "--reason", "stop!"),
    ):
        ran = cmd(*args)
        assert ran.code == 1 and "past the point of no return" in ran.err


def test_decisions_need_their_permission_and_a_reason(hq, make_workspace, cmd) -> None:
    make_workspace()
    req = request_at(T, hq)
    make_staff("hq-reader")
    for args, perm in (
        (("hold_retirement", str(req.id), "--by", "hq-reader", "--reason", "x"), "hold_retirementrequest"),
        (("release_retirement", str(req.id), "--by", "hq-reader", "--reason", "r"), "hold_retirementrequest"),
        (("cancel_retirement", str(req.id), "--by", "hq-reader", "--reason", "x"), "cancel_retirementrequest"),
        (("resume_retirement", str(req.id), "--by", "hq-reader", "--reason", "r"), "resume_retirementrequest"),
    ):
        ran = cmd(*args)
        assert ran.code == 1 and f"(only active staff holding retirements.{perm})" in ran.err
    for command in ("hold_retirement", "cancel_retirement"):
        ran = cmd(command, str(req.id), "--by", "hq-alice", "--reason", "")
        assert ran.code == 2 and "a reason is required" in ran.err
    assert fresh(req).status == "waiting"


def test_service_refusal_types(hq, make_workspace) -> None:
    make_workspace()
    req = request_at(T, hq)
    with pytest.raises(Refused, match="not held"):
        retirement_release(actor=Actor.of(hq), request_id=req.id, reason="owner confirmed")
    retirement_cancel(actor=Actor.of(hq), request_id=req.id, reason="x")
    with pytest.raises(Refused, match="already cancelled"):
        retirement_cancel(actor=Actor.of(hq), request_id=req.id, reason="x")


def test_a_watcher_woken_while_its_request_is_held_sleeps_until_the_release(hq, make_workspace) -> None:
    from retirements import watcher

    make_workspace()
    req = request_at(T, hq)
    run_at(T)
    with time_machine.travel(T + DAY, tick=False):
        retirement_hold(actor=Actor.of(hq), request_id=req.id, reason="owner asked")
    held = fresh(req)
    assert held.status == "held" and held.watcher_id is not None
    with time_machine.travel(T + 2 * DAY, tick=False):
        said = watcher.step(held.watcher_id, now=T + 2 * DAY)
    after = fresh(req)
    assert said == "sleep" and after.status == "held" and after.next_wake_at is None
    assert after.watcher is not None and after.watcher.status == "running"  # it beat, and waits for the release


def test_a_never_activated_release_mails_the_eligibility_its_final_warning_makes_true(hq, make_workspace) -> None:
    """Held and released, a never-activated workspace's final warning goes out again late, which
    moves eligibility so its 24 h hold; the released mail sent in that same step names the moved
    date, the one the final warning names, not the one the move replaced."""
    make_workspace(activated=False)
    req = request_at(T, hq)
    run_at(T)  # request received and the final warning (its lead is the whole day), both at once
    at(T + 6 * HOUR, retirement_hold, actor=Actor.of(hq), request_id=req.id, reason="owner asked")
    run_at(T + 6 * HOUR)
    at(T + 8 * HOUR, retirement_release, actor=Actor.of(hq), request_id=req.id, reason="owner confirmed")
    assert fresh(req).eligible_at == T + DAY + 2 * HOUR  # moved by the 2 h on hold
    mail.outbox.clear()
    run_at(T + 8 * HOUR + MINUTE)

    after = fresh(req)
    assert after.eligible_at == T + 8 * HOUR + MINUTE + DAY  # the late final warning keeps its 24 h
    # Both went out in that one step (the rows say so), and both mails name the moved date.
    assert set(
        after.notices.filter(status="delivered", delivered_at=T + 8 * HOUR + MINUTE).values_list("kind", flat=True)
    ) == {"released", "final_warning"}
    named = "2026-12-02 17:01:00 UTC"
    assert [str(m.subject) for m in mail.outbox] == [
        f"Final warning: workspace acme-old is deleted after {named}",
        f"Retirement of workspace acme-old is released; eligible after {named}",
    ]
    for m in mail.outbox:
        assert f"Eligible for deletion at: {named}\n" in str(m.body)


def test_the_database_refuses_a_notice_move_without_its_reason_and_a_reason_without_a_move(hq, make_workspace) -> None:
    from django.db import IntegrityError, connection, transaction

    from retirements.models import NoticeSlot

    make_workspace()
    req = request_at(T, hq)
    slot = NoticeSlot.objects.get(request=req, kind="final_warning")
    without = "a notice re-planned or suppressed says why, in the same update"
    with connection.cursor() as cur:
        for move, refusal in (
            ("due_at = due_at + interval '1 day'", without),  # re-planned, no reason
            ("status = 'suppressed'", without),  # suppressed, no reason
            ("moved_because = 'tidying up'", "moved_because is written with a move only, never afterwards"),
        ):
            with pytest.raises(IntegrityError, match=refusal), transaction.atomic():
                cur.execute(f"UPDATE retirements_noticeslot SET {move} WHERE id = %s", [slot.id])
        cur.execute(
            "UPDATE retirements_noticeslot SET due_at = due_at + interval '1 day', moved_because = 'first'"
            " WHERE id = %s",
            [slot.id],
        )
        with pytest.raises(IntegrityError, match=without), transaction.atomic():  # a second move, the old reason
            cur.execute("UPDATE retirements_noticeslot SET due_at = due_at + interval '1 day' WHERE id = %s", [slot.id])
    assert NoticeSlot.objects.values_list("due_at", "status", "moved_because").get(id=slot.id) == (
        T + 30 * DAY, "pending", "first"
    )  # fmt: skip
