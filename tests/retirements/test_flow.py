"""Waiting periods run to the purge with notices on time (hops 2-4, 6, 7)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core import mail

from retirements.models import PurgeJob
from tests.retirements.helpers import fresh, notice_states, request_at, run_at, subjects

pytestmark = pytest.mark.django_db
T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)


def test_thirty_day_request_runs_to_the_purge_with_notices_on_time(hq, make_workspace) -> None:
    make_workspace()
    req = request_at(T, hq)
    assert req.eligible_at == T + 30 * DAY

    run_at(T)
    assert subjects() == ["Retirement requested for workspace acme-old"]
    assert mail.outbox[0].to == ["hq-alice@hq.example", "hq-staff@localhost"]
    assert fresh(req).next_wake_at == T + 23 * DAY

    run_at(T + 23 * DAY - timedelta(seconds=1))  # nothing due yet
    assert len(mail.outbox) == 1
    run_at(T + 23 * DAY)
    assert subjects()[-1] == "Workspace acme-old becomes eligible for deletion in 7 days"
    run_at(T + 29 * DAY)
    assert subjects()[-1].startswith("Final warning: workspace acme-old")
    assert not PurgeJob.objects.exists()
    assert fresh(req).next_wake_at == T + 30 * DAY

    run_at(T + 30 * DAY - timedelta(seconds=1))
    assert not PurgeJob.objects.exists() and fresh(req).workspace.lifecycle == "deletion_pending"

    summary = run_at(T + 30 * DAY)
    after = fresh(req)
    assert after.status == "completed" and after.workspace.lifecycle == "deleted"
    job = PurgeJob.objects.get(request=req)
    assert job.status == "done" and summary["purges"] == [f"purge {job.operation_id} done"]
    assert subjects()[-1] == "Deletion of workspace acme-old has started"
    assert notice_states(req) == {
        "request_received": "delivered",
        "reminder_7_days": "delivered",
        "final_warning": "delivered",
        "destruction_started": "delivered",
    }
    assert list(after.decisions.values_list("action", flat=True)) == ["request", "point_of_no_return", "purged"]
    watcher = after.watchers.get()
    assert watcher.status == "settled" and f"purge operation {job.operation_id}" in watcher.conclusion

    run_at(T + 31 * DAY)  # nothing is sent or purged twice
    assert len(mail.outbox) == 4 and PurgeJob.objects.count() == 1


def test_never_activated_workspace_takes_one_day(hq, make_workspace) -> None:
    make_workspace(activated=False)
    req = request_at(T, hq)
    assert (req.eligibility_policy, req.eligible_at) == ("never_activated_1_day", T + DAY)
    run_at(T)
    assert notice_states(req) == {"request_received": "delivered", "final_warning": "delivered"}
    run_at(T + DAY - timedelta(seconds=1))
    assert fresh(req).status == "waiting"
    run_at(T + DAY)
    assert fresh(req).workspace.lifecycle == "deleted"


def test_disposable_workspace_takes_the_short_policy(hq, make_workspace, settings) -> None:
    settings.RETIREMENT_DISPOSABLE_WAIT_SECONDS = 600
    make_workspace(is_disposable_test=True)
    req = request_at(T, hq)
    assert (req.eligibility_policy, req.eligible_at) == ("disposable_test", T + timedelta(minutes=10))
    run_at(T)
    run_at(T + timedelta(minutes=10))
    assert fresh(req).workspace.lifecycle == "deleted"


def test_run_watchers_command_reports_what_it_did(cmd, hq, make_workspace) -> None:
    import json

    import time_machine

    make_workspace()
    req = request_at(T, hq)
    with time_machine.travel(T, tick=False):
        ran = cmd("run_watchers")
    assert ran.code == 0
    assert json.loads(ran.out)["steps"] == {str(req.id): f"wait until {(T + 23 * DAY):%Y-%m-%d %H:%M:%S} UTC"}
    shown = cmd("show_retirement", str(req.id))
    assert shown.code == 0 and "request_received" in shown.out and "delivered" in shown.out
    data = json.loads(cmd("show_retirement", str(req.id), "--json").out)
    assert data["status"] == "waiting" and data["workspace"]["lifecycle"] == "deletion_pending"
    assert data["next_wake_at"] == (T + 23 * DAY).isoformat()
    assert [(n["kind"], n["status"], n["attempts"]) for n in data["notices"]] == [
        ("request_received", "delivered", 1),
        ("reminder_7_days", "pending", 0),
        ("final_warning", "pending", 0),
    ]
    assert [w["authoritative"] for w in data["watchers"]] == [True] and data["purge_job"] is None
    assert [d["action"] for d in data["decisions"]] == ["request"]


def test_a_release_after_the_final_warning_warns_again_with_the_new_date(hq, make_workspace) -> None:
    """Seed 002's notices never say something false: a hold placed after the final warning went out
    moves eligibility, so the warning's date is no longer true; on release a new final warning is
    planned and sent, naming the new date, and the purge waits for it."""
    from core import present
    from core.authority import Actor
    from retirements.services import retirement_hold, retirement_release

    make_workspace()
    req = request_at(T, hq)
    for at in (T, T + 23 * DAY, T + 29 * DAY):
        run_at(at)
    assert subjects()[-1] == f"Final warning: workspace acme-old is deleted after {present.absolute(T + 30 * DAY)}"
    with time_machine.travel(T + 29 * DAY + 12 * HOUR, tick=False):
        retirement_hold(actor=Actor.of(hq), request_id=req.id, reason="customer disputes")
    with time_machine.travel(T + 35 * DAY, tick=False):
        retirement_release(actor=Actor.of(hq), request_id=req.id, reason="dispute settled")
    after = fresh(req)
    assert after.eligible_at == T + 35 * DAY + 12 * HOUR
    warnings = list(after.notices.filter(kind="final_warning").values_list("status", "due_at"))
    assert warnings == [("delivered", T + 29 * DAY), ("pending", T + 35 * DAY)]
    run_at(T + 35 * DAY)
    # Sent at release, it promises its full lead: eligibility moves to a day after it went out.
    assert fresh(req).eligible_at == T + 36 * DAY
    finals = [s for s in subjects() if s.startswith("Final warning")]
    assert finals[-1] == f"Final warning: workspace acme-old is deleted after {present.absolute(T + 36 * DAY)}"
    assert len(finals) == 2
    run_at(T + 36 * DAY - timedelta(seconds=1))
    assert not PurgeJob.objects.exists()


def test_a_reminder_held_past_its_lead_is_suppressed_not_sent_late(hq, make_workspace) -> None:
    from core.authority import Actor
    from retirements.services import retirement_hold, retirement_release

    make_workspace()
    req = request_at(T, hq)
    run_at(T)  # the reminder's send fails from T + 23 days on: it is still pending when the hold comes
    with time_machine.travel(T + 23 * DAY + HOUR, tick=False):
        retirement_hold(actor=Actor.of(hq), request_id=req.id, reason="legal review")
    with time_machine.travel(T + 30 * DAY, tick=False):
        retirement_release(actor=Actor.of(hq), request_id=req.id, reason="review done")
    after = fresh(req)
    assert after.eligible_at == T + 37 * DAY - HOUR
    reminder = after.notices.get(kind="reminder_7_days")
    assert reminder.status == "suppressed" and "less than the reminder's 7-day lead" in reminder.moved_because
    run_at(T + 30 * DAY)
    assert not any("becomes eligible" in s for s in subjects())
    assert notice_states(req)["final_warning"] == "pending"
