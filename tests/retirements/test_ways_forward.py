"""Retirement ways forward (issue 20, item 7): each test shows the rows before and after.

A refused purge is retried once authority is back or closed by a staff decision, red in
health and owned by a person until then (a boundary hold too). Resume replaces only a watcher
that missed its wake-up or settled without concluding the request; three concurrent resumes
give one winner; a resume never waits behind a watcher mid-step; a current-but-settled watcher
counts as stalled; each audit row carries the time of its own decision; production refuses a
disposable test workspace at creation.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta

import psutil
import pytest
import time_machine
from django.core import mail
from django.db import connection

from core import clock
from core.authority import Actor
from core.errors import BadInput, Refused
from ops.health import report
from retirements import purge, watcher
from retirements.models import Alarm, Decision, NoticeSlot, PurgeJob, RetirementWatcher, Workspace
from retirements.selectors import count_stalls, detect_stalls, stall_reason
from retirements.services import (
    retirement_close_refused,
    retirement_resume,
    retirement_retry_purge,
    workspace_create,
)
from retirements.watcher import run_due
from tests.conftest import manage_argv, subprocess_env
from tests.retirements.helpers import BUSY, behind_a_watcher_mid_step, fresh, request_at, run_at
from tests.support import force, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def watchers(req) -> list[tuple[str, bool]]:
    current = fresh(req).watcher_id
    return [(w.status, w.id == current) for w in RetirementWatcher.objects.filter(request=req).order_by("created_at")]


def test_resume_is_refused_for_a_watcher_asleep_until_a_wake_up_weeks_away(hq, make_workspace) -> None:
    """Seed 002: recovery refuses while the old execution is still running. A watcher waiting
    for a wake-up 23 days away last beat long ago and still runs."""
    make_workspace()
    req = request_at(T, hq)
    run_at(T)  # notices sent; the watcher sleeps until the 7-day reminder
    before = watchers(req)
    assert before == [("running", True)] and fresh(req).next_wake_at == T + 23 * DAY
    with time_machine.travel(T + 6 * DAY, tick=False), pytest.raises(Refused) as refused:
        retirement_resume(actor=Actor.of(hq), request_id=req.id, reason="watcher stalled")
    assert "the watcher is healthy: its next wake-up is 2026-12-24 09:00:00 UTC (in 17 d)" in str(refused.value)
    assert watchers(req) == before and not Decision.objects.filter(request=req, action="resume").exists()


def test_three_concurrent_resumes_of_a_stalled_watcher_give_one_winner(hq, make_workspace) -> None:
    make_workspace()
    req = request_at(T, hq)  # its push was lost: the watcher never starts
    assert watchers(req) == [("pending", True)]
    later = T + timedelta(minutes=16)
    assert [r.id for r, _ in detect_stalls(now=later)] == [req.id]
    start = threading.Barrier(3)
    results: list[str] = []

    def resume() -> None:
        try:
            start.wait()
            with time_machine.travel(later, tick=False):
                retirement_resume(actor=Actor.of(hq), request_id=req.id, reason="watcher stalled")
            results.append("replaced")
        except Refused as exc:
            results.append(f"refused: {exc}")
        finally:
            connection.close()

    threads = [threading.Thread(target=resume) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(r.split(":")[0] for r in results) == ["refused", "refused", "replaced"], results
    assert watchers(req) == [("superseded", False), ("pending", True)]
    assert Decision.objects.filter(request=req, action="resume").count() == 1


@pytest.mark.slow
def test_a_resume_while_the_watcher_is_mid_step_is_refused_at_once(hq, make_workspace) -> None:
    """Not a 30-second lock timeout and a traceback: one line, at once, nothing written."""
    make_workspace()
    req = request_at(clock.now() - timedelta(minutes=20), hq)  # stalled: never started
    stepping = subprocess.Popen(manage_argv("run_watchers"), env=subprocess_env(PAUSE_AT="watcher-woke"))
    try:
        proc = psutil.Process(stepping.pid)
        wait_for(lambda: proc.status() == psutil.STATUS_STOPPED, what="the watcher paused mid-step, holding its lock")
        before = watchers(req)
        started = time.monotonic()
        with pytest.raises(Refused, match="the watcher is working on this workspace right now"):
            retirement_resume(actor=Actor.of(hq), request_id=req.id, reason="watcher stalled")
        assert time.monotonic() - started < 5
        assert watchers(req) == before
    finally:
        stepping.send_signal(signal.SIGCONT)
        stepping.communicate(timeout=120)
    assert stepping.returncode == 0
    assert RetirementWatcher.objects.get(request=req).status == "running"  # the step went on


def test_a_hold_behind_a_watcher_mid_step_is_one_line_at_once_and_writes_nothing(hq, make_workspace, cmd) -> None:
    """Another connection (a thread standing in for a watcher stopped mid-step) holds the
    workspace and request rows FOR UPDATE: `hold_retirement` is refused at once in one line,
    exit 1, nothing written, never a 30-second lock timeout and its traceback; once the lock is
    let go, the same command holds the retirement."""
    from tests.retirements.conftest import retirement_rows

    make_workspace()
    req = request_at(clock.now(), hq)
    before = retirement_rows()
    hold = ("hold_retirement", str(req.id), "--by", "hq-alice", "--reason", "customer disputes")
    ran, took = behind_a_watcher_mid_step(req, lambda: cmd(*hold))
    assert ran.code == 1, (ran.out, ran.err)
    assert ran.err.strip().splitlines() == [BUSY], ran.err
    assert "Traceback" not in ran.err and ran.out == ""
    assert took < 15, took  # the decision's own short wait, not the database's 30-second lock timeout
    assert retirement_rows() == before
    again = cmd(*hold)
    assert again.code == 0, again.err
    assert fresh(req).status == "held"


def test_a_current_watcher_that_settled_while_the_request_waits_counts_as_stalled(hq, make_workspace) -> None:
    make_workspace()
    req = request_at(T, hq)
    run_at(T)
    assert count_stalls(now=T + DAY) == 0
    force(RetirementWatcher.objects.filter(request=req), status="settled")  # a crash or a hand fix
    # Its page says so at once (the pure rule), and resume is offered at once.
    assert stall_reason(fresh(req), T + DAY) == "watcher settled without concluding the request"
    # Health and the overview count it once its wake-up (the 7-day reminder) passes by the grace:
    # such a watcher is never stepped, and no scan of the watchers looks for it before.
    wake = fresh(req).next_wake_at
    assert wake is not None
    later = wake + timedelta(minutes=16)
    stalled = detect_stalls(now=later)
    assert [(r.id, why) for r, why in stalled] == [(req.id, "watcher settled without concluding the request")]
    assert count_stalls(now=later) == 1
    with time_machine.travel(later, tick=False):
        assert report(clock.now())["checks"]["stalled_watchers"] == {"ok": False, "count": 1}
        retirement_resume(actor=Actor.of(hq), request_id=req.id, reason="watcher stalled")
    assert watchers(req) == [("settled", False), ("pending", True)]
    assert count_stalls(now=later) == 0


def test_each_audit_row_carries_the_time_of_its_own_decision(hq, make_workspace) -> None:
    """One tick takes the point of no return and then purges: the purge is logged after it."""
    make_workspace()
    req = request_at(clock.now() - 31 * DAY, hq)
    run_at(req.eligible_at - DAY)  # the notices, on time
    tick_started = clock.now()
    run_due(now=tick_started)
    rows = list(Decision.objects.filter(request=req).order_by("id").values_list("action", "created_at"))
    assert [a for a, _ in rows] == ["request", "point_of_no_return", "purged"]
    assert rows[1][1] >= tick_started and rows[2][1] > rows[1][1], rows


def test_production_refuses_a_disposable_test_workspace_at_creation(settings) -> None:
    settings.PRODUCTION = True
    with pytest.raises(Refused, match="disposable test workspaces are refused in production"):
        workspace_create(
            slug="scratch", name="Scratch", disabled=True, never_activated=False, disposable=True, legal_hold=False
        )
    assert not Workspace.objects.exists()
    settings.PRODUCTION = False
    workspace_create(slug="scratch", name="Scratch", disabled=True, never_activated=False, disposable=True,
                     legal_hold=False)  # fmt: skip
    assert Workspace.objects.get(slug="scratch").is_disposable_test


def ages_at(at: datetime) -> list[dict[str, str]]:
    """The hourly age check (the schedule "retirements: age alarms"), at `at`."""
    with time_machine.travel(at, tick=False):
        return watcher.age_alarms(now=clock.now())


def refused_purge(hq, make_workspace):
    """A retirement past its point of no return whose requester then lost authority: the
    purge's boundary refused it and nothing was purged."""
    make_workspace(activated=False)
    start = clock.now() - 2 * DAY
    req = request_at(start, hq)
    run_at(start)
    with time_machine.travel(req.eligible_at + timedelta(minutes=1), tick=False):
        watcher_id = fresh(req).watcher_id
        assert watcher_id is not None and watcher.step(watcher_id, now=clock.now()) == "proceed"
    job = PurgeJob.objects.get(request=req)
    hq.groups.clear()
    assert "refused" in purge.run_purge(job.id, now=clock.now())
    return fresh(req), PurgeJob.objects.get(id=job.id)


def test_a_refused_purge_is_red_in_health_owned_by_a_person_and_retried_once_authority_is_back(
    hq, make_workspace, other_staff
) -> None:
    req, job = refused_purge(hq, make_workspace)
    # Before: executing, deleting, refused; owned by a staff person (not the requester who lost authority).
    assert (req.status, req.workspace.lifecycle, job.status) == ("executing", "deleting", "refused")
    assert req.owner_id == other_staff.id
    assert report(clock.now())["checks"]["purges_refused"] == {"ok": False, "count": 1}
    with pytest.raises(Refused, match="requester hq-alice is still not active staff holding request_retirement"):
        retirement_retry_purge(actor=Actor.of(other_staff), request_id=req.id, reason="try again")
    assert PurgeJob.objects.get(id=job.id).status == "refused"
    hq.groups.add(*other_staff.groups.all())  # authority is back
    retirement_retry_purge(actor=Actor.of(other_staff), request_id=req.id, reason="permission restored (IT-77)")
    queued = PurgeJob.objects.get(id=job.id)
    assert (queued.status, queued.lease_owner, queued.refusal) == ("queued", None, "")
    assert not Alarm.objects.filter(request=req, kind="purge_refused", resolved_at__isnull=True).exists()
    assert report(clock.now())["checks"]["purges_refused"]["ok"] is True
    assert purge.run_purge(job.id, now=clock.now()).endswith("done")
    after = fresh(req)
    assert (after.status, after.workspace.lifecycle) == ("completed", "deleted")
    assert list(Decision.objects.filter(request=req).order_by("id").values_list("action", flat=True))[-3:] == [
        "purge_refused", "retry_purge", "purged",
    ]  # fmt: skip


def test_a_refused_purge_is_closed_by_a_staff_decision_with_a_reason(hq, make_workspace, other_staff) -> None:
    req, job = refused_purge(hq, make_workspace)
    with pytest.raises(BadInput):
        retirement_close_refused(actor=Actor.of(other_staff), request_id=req.id, reason=" ")
    assert fresh(req).status == "executing"
    retirement_close_refused(actor=Actor.of(other_staff), request_id=req.id, reason="requester left; keep the data")
    after = fresh(req)
    assert (after.status, after.workspace.lifecycle) == ("closed", "disabled")
    assert after.conclusion == (
        "closed without purge by hq-bob after the purge was refused: requester left; keep the data"
    )
    assert PurgeJob.objects.get(id=job.id).status == "refused"  # the evidence stays
    assert report(clock.now())["checks"]["purges_refused"]["ok"] is True
    with pytest.raises(Refused, match="has no refused purge"):
        retirement_retry_purge(actor=Actor.of(other_staff), request_id=req.id, reason="again")


def test_a_boundary_hold_is_owned_by_a_named_staff_person_not_the_requester(hq, make_workspace, other_staff) -> None:
    make_workspace()
    req = request_at(T, hq)
    run_at(T)
    assert fresh(req).owner_id == hq.id
    run_at(req.eligible_at - DAY)  # the final warning, on time
    hq.groups.clear()
    run_at(req.eligible_at)
    held = fresh(req)
    assert held.status == "held" and held.held_by_id is None
    assert held.owner_id == other_staff.id  # the first active staff member allowed to hold retirements
    # Its staff notice: how the boundary's hold is observed (seed 002, hop 6).
    run_at(req.eligible_at + timedelta(minutes=1))
    slot = NoticeSlot.objects.get(request=req, kind="held_at_point_of_no_return")
    assert slot.status == "delivered" and not slot.gating
    assert mail.outbox[-1].subject == "Retirement of workspace acme-old was held at the point of no return"


def test_a_close_at_the_point_of_no_return_sends_its_staff_notice(hq, make_workspace) -> None:
    ws = make_workspace()
    req = request_at(T, hq)
    run_at(T)
    run_at(req.eligible_at - DAY)
    Workspace.objects.filter(id=ws.id).update(protected_reason="customer's auditors")  # changed by hand
    run_at(req.eligible_at)
    assert fresh(req).status == "closed"
    run_at(req.eligible_at + timedelta(minutes=1))
    assert NoticeSlot.objects.get(request=req, kind="closed_at_point_of_no_return").status == "delivered"
    assert mail.outbox[-1].subject == (
        "Retirement of workspace acme-old was closed without purge at the point of no return"
    )


def test_the_command_line_retries_or_closes_a_refused_purge(hq, make_workspace, other_staff, cmd) -> None:
    req, _ = refused_purge(hq, make_workspace)
    ran = cmd("retry_purge", str(req.id), "--by", "hq-bob", "--reason", "try")
    assert ran.code == 1 and "requester hq-alice is still not active staff" in ran.err
    ran = cmd("close_retirement", str(req.id), "--by", "hq-bob")
    assert ran.code != 0 and fresh(req).status == "executing"  # a reason is required
    ran = cmd("close_retirement", str(req.id), "--by", "hq-bob", "--reason", "keep the data")
    assert ran.code == 0, ran.err
    assert '"status": "closed"' in ran.out and fresh(req).workspace.lifecycle == "disabled"


def test_notice_emails_give_times_to_the_second_in_utc(hq, make_workspace) -> None:
    from django.core import mail

    make_workspace()
    request_at(T, hq)
    run_at(T)
    body = mail.outbox[0].body
    assert "Requested by hq-alice at 2026-12-01 09:00:00 UTC" in body
    assert "Eligible for deletion at: 2026-12-31 09:00:00 UTC" in body and "+00:00" not in body


def test_a_watcher_nearing_its_lifetime_and_a_long_hold_raise_alarms_ahead_of_time(hq, make_workspace) -> None:
    """Seed 002: a watcher execution can last a year. Held 400 days, a request would carry on
    silently; instead the hold alarms at 90 days and the lifetime 30 days before the year ends."""
    from retirements.services import retirement_hold, retirement_release

    make_workspace()
    req = request_at(T, hq)
    run_at(T)
    with time_machine.travel(T + DAY, tick=False):
        retirement_hold(actor=Actor.of(hq), request_id=req.id, reason="legal review")
    ages_at(T + 90 * DAY)
    assert not Alarm.objects.filter(request=req).exists()  # 89 days on hold: not yet
    ages_at(T + 91 * DAY)
    hold_alarm = Alarm.objects.get(request=req, kind="hold_too_long", resolved_at__isnull=True)
    assert hold_alarm.message.startswith("on hold for 90 d, past the limit of 90 d; release or cancel it")
    ages_at(T + 92 * DAY)
    assert Alarm.objects.filter(request=req, kind="hold_too_long").count() == 1  # raised once
    ages_at(T + 335 * DAY)
    life = Alarm.objects.get(request=req, kind="watcher_lifetime", resolved_at__isnull=True)
    assert "its watcher reaches its lifetime of 365 d at 2027-12-01 09:00:00 UTC" in life.message
    with time_machine.travel(T + 336 * DAY, tick=False):
        retirement_release(actor=Actor.of(hq), request_id=req.id, reason="review done")
    ages_at(T + 336 * DAY)
    assert Alarm.objects.get(id=hold_alarm.id).resolved_at is not None  # released: that alarm ends
    assert Alarm.objects.get(id=life.id).resolved_at is None  # still open until the request concludes
    with time_machine.travel(T + 336 * DAY, tick=False):
        assert report(clock.now())["work"]["aged_retirements"]["count"] == 1


def test_stalled_watchers_are_counted_in_full_while_a_page_of_them_is_loaded(hq, make_workspace) -> None:
    """`selectors.sql` stalled returns the first ids and the whole count: health and /metrics load
    one id and still count every stalled watcher; the overview's list stops at its limit."""
    slugs = ["old-a", "old-b", "old-c"]
    for slug in slugs:
        make_workspace(slug)
    reqs = [request_at(T, hq, slug=slug) for slug in slugs]
    run_at(T)
    force(RetirementWatcher.objects.filter(request__in=reqs), status="settled")
    wakes = [fresh(r).next_wake_at for r in reqs]
    assert None not in wakes
    later = max(w for w in wakes if w is not None) + timedelta(minutes=16)
    assert count_stalls(now=later) == 3
    assert len(detect_stalls(now=later, limit=2)) == 2
    assert {r.id for r, _ in detect_stalls(now=later)} == {r.id for r in reqs}


@pytest.mark.slow
def test_a_watcher_paused_between_a_send_and_its_save_is_not_replaced_until_its_claim_runs_out(
    hq, make_workspace
) -> None:
    """Seed 002: recovery refuses while the old execution may still run. A real watcher process,
    stopped after sending a notice and before saving it (its wake-up long overdue, its heartbeat
    written in that same step), is alive: resume is refused. Once its heartbeat and claim have run
    out, resume replaces it, the new watcher sends the notice again (at least once), and the old
    process's late save changes nothing."""
    make_workspace()
    req = request_at(clock.now() - timedelta(minutes=20), hq)  # its push was lost: due 20 minutes ago
    paused = subprocess.Popen(manage_argv("run_watchers"), env=subprocess_env(PAUSE_AT="notice-sent"))
    try:
        proc = psutil.Process(paused.pid)
        wait_for(lambda: proc.status() == psutil.STATUS_STOPPED, what="the watcher paused after a send")
        claimed = NoticeSlot.objects.get(request=req, status="sending")
        now = clock.now()
        wake = fresh(req).next_wake_at
        assert wake is not None and wake < now - timedelta(minutes=15)  # the wake-up alone says "stalled"
        assert stall_reason(fresh(req), now) is None and count_stalls(now=now) == 0
        with pytest.raises(Refused, match="the watcher may still be running: it showed a sign of life until"):
            retirement_resume(actor=Actor.of(hq), request_id=req.id, reason="watcher stalled")
        assert watchers(req) == [("running", True)]
        assert not Decision.objects.filter(request=req, action="resume").exists()
        # Its claim and heartbeat run out: now it shows no sign of life, and resume replaces it.
        assert claimed.claim_expires_at is not None
        later = claimed.claim_expires_at + timedelta(seconds=1)
        assert stall_reason(fresh(req), later) is not None and count_stalls(now=later) == 1
        with time_machine.travel(later, tick=False):
            retirement_resume(actor=Actor.of(hq), request_id=req.id, reason="watcher stalled")
        assert watchers(req) == [("superseded", False), ("pending", True)]
        run_at(later)  # the new watcher claims the expired claim and sends again
        resent = NoticeSlot.objects.get(id=claimed.id)
        assert resent.status == "delivered" and resent.delivered_at == later
        before = (
            list(NoticeSlot.objects.filter(request=req).values_list("id", "status", "delivered_at", "claimed_by")),
            list(Decision.objects.filter(request=req).values_list("id", "action")),
            fresh(req).next_wake_at,
        )
    finally:
        paused.send_signal(signal.SIGCONT)
        paused.communicate(timeout=120)
    assert paused.returncode == 0
    after = (
        list(NoticeSlot.objects.filter(request=req).values_list("id", "status", "delivered_at", "claimed_by")),
        list(Decision.objects.filter(request=req).values_list("id", "action")),
        fresh(req).next_wake_at,
    )
    assert after == before  # the old process's late save and boundary wrote nothing
    assert watchers(req) == [("superseded", False), ("running", True)]
