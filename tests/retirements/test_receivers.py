"""Where retirement effects land: notices sent at least once and never twice for nothing,
and a purge that rechecks its fencing token, operation and authority with the effect."""

from __future__ import annotations

import json
import signal
import subprocess
from datetime import timedelta
from pathlib import Path

import psutil
import pytest
from django.core import mail
from django.utils import timezone

from core.authority import Actor
from retirements import purge
from retirements.models import Alarm, Decision, NoticeSlot, PurgeJob
from retirements.services import retirement_retry_notices
from tests.conftest import manage_argv, subprocess_env
from tests.retirements.helpers import executing, fresh, reject_a_stale_executor, request_at, run_at
from tests.support import force, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def sent_subjects(folder: Path) -> list[str]:
    """What the mail receiver got: every message the file backend wrote."""
    return [
        line.removeprefix("Subject: ")
        for path in folder.iterdir()
        for line in path.read_text().splitlines()
        if line.startswith("Subject: ")
    ]


def mail_env(folder: Path, **extra: str) -> dict[str, str]:
    return subprocess_env(
        EMAIL_BACKEND="django.core.mail.backends.filebased.EmailBackend", EMAIL_FILE_PATH=str(folder), **extra
    )


@pytest.mark.slow
def test_two_watcher_processes_at_once_send_every_notice_exactly_once(hq, make_workspace, tmp_path, observe) -> None:
    now = timezone.now()
    requests = []
    for n in range(20):
        make_workspace(f"ws-{n:02}")
        requests.append(request_at(now, hq, slug=f"ws-{n:02}"))
    procs = [
        subprocess.Popen(manage_argv("run_watchers"), env=mail_env(tmp_path), stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for proc in procs:
        proc.communicate(timeout=120)
        assert proc.returncode == 0
    subjects = sent_subjects(tmp_path)
    assert len(subjects) == 20 and len(set(subjects)) == 20  # one request_received per workspace
    slots = NoticeSlot.objects.filter(kind="request_received")
    assert set(slots.values_list("status", "attempts")) == {("delivered", 1)}
    observe(f"2 run_watchers processes over 20 due notices: {len(subjects)} mails at the receiver, each once")


@pytest.mark.slow
def test_a_sender_killed_between_send_and_save_sends_once_more_after_its_claim(
    hq, make_workspace, tmp_path, settings
) -> None:
    make_workspace()
    req = request_at(timezone.now(), hq)
    proc = subprocess.run(manage_argv("run_watchers"), env=mail_env(tmp_path, CRASH_AT="notice-sent"), timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert sent_subjects(tmp_path) == ["Retirement requested for workspace acme-old"]
    slot = NoticeSlot.objects.get(request=req, kind="request_received")
    assert slot.status == "sending"
    run_at(timezone.now())  # the claim stands: nobody sends it again
    assert mail.outbox == []
    claim_ends = slot.claim_expires_at
    assert claim_ends is not None
    run_at(claim_ends)  # the sender is gone: at least once, sent again, now saved
    run_at(claim_ends + timedelta(hours=1))
    assert [m.subject for m in mail.outbox] == ["Retirement requested for workspace acme-old"]
    slot.refresh_from_db()
    assert (slot.status, slot.attempts) == ("delivered", 2)


def case_rows(req) -> tuple[object, ...]:
    """What a step writes for a case: its notices, its decisions, its wake-up and last change."""
    slots = NoticeSlot.objects.filter(request=req).order_by("id")
    return (
        list(slots.values_list("id", "status", "delivered_at", "claimed_by", "claim_generation")),
        list(Decision.objects.filter(request=req).values_list("id", "action")),
        fresh(req).next_wake_at,
        fresh(req).updated_at,
    )


@pytest.mark.slow
def test_a_watcher_paused_holding_its_notice_claim_stands_down_once_it_was_taken_over(
    hq, make_workspace, tmp_path, observe
) -> None:
    """Issue 51 item 5. A watcher process stopped after claiming "request received", before its
    send; its claim runs out and a second watcher process takes it over (the next generation), sends
    and saves; the first, continued, re-checks its claim just before the send, sends nothing, writes
    nothing for the case, and says it stood down: one mail."""
    make_workspace()
    req = request_at(timezone.now(), hq)
    first = subprocess.Popen(
        manage_argv("run_watchers"),
        env=mail_env(tmp_path, PAUSE_AT="notice-claimed"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        proc = psutil.Process(first.pid)
        wait_for(lambda: proc.status() == psutil.STATUS_STOPPED, what="the watcher paused holding its claim")
        held = NoticeSlot.objects.get(request=req, kind="request_received")
        assert (held.status, held.claim_generation, sent_subjects(tmp_path)) == ("sending", 1, [])
        force(NoticeSlot.objects.filter(id=held.id), claim_expires_at=timezone.now() - timedelta(seconds=1))
        second = subprocess.run(manage_argv("run_watchers"), env=mail_env(tmp_path), capture_output=True, text=True)
        assert second.returncode == 0, second.stderr
        taken = NoticeSlot.objects.get(id=held.id)
        assert (taken.status, taken.claim_generation) == ("delivered", 2)
        assert sent_subjects(tmp_path) == ["Retirement requested for workspace acme-old"]
        before = case_rows(req)
    finally:
        first.send_signal(signal.SIGCONT)
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    said = json.loads(out)["steps"][str(req.id)]
    assert said.startswith("stood down: request_received not sent, its claim (generation 1) was taken over"), said
    assert f"notice slot={held.id} kind=request_received not sent, stood down" in err
    assert sent_subjects(tmp_path) == ["Retirement requested for workspace acme-old"]  # one mail
    assert case_rows(req) == before  # the stale watcher wrote nothing for the case
    observe(
        f"watcher SIGSTOPped holding its notice claim (generation 1); a second watcher took generation 2 and "
        f"sent; the first, continued, said '{said[:90]}'; {len(sent_subjects(tmp_path))} mail"
    )


def test_the_database_refuses_a_notice_claim_that_does_not_take_the_next_generation(hq, make_workspace) -> None:
    from django.db import IntegrityError, connection, transaction

    make_workspace()
    req = request_at(timezone.now(), hq)
    slot = NoticeSlot.objects.get(request=req, kind="request_received")
    with connection.cursor() as cur:
        for move in (
            "status = 'sending', claimed_by = 'intruder'",  # a claim without a new generation
            "status = 'sending', claimed_by = 'intruder', claim_generation = 5",  # one that skips
            "claim_generation = 1",  # a generation moved by no claim
        ):
            with pytest.raises(IntegrityError, match="a claim takes the next generation"), transaction.atomic():
                cur.execute(f"UPDATE retirements_noticeslot SET {move} WHERE id = %s", [slot.id])
    assert NoticeSlot.objects.get(id=slot.id).claim_generation == 0
    run_at(timezone.now())  # the watcher's own claim takes generation 1
    assert NoticeSlot.objects.values_list("status", "claim_generation").get(id=slot.id) == ("delivered", 1)


@pytest.mark.slow
def test_a_purge_executor_paused_past_its_lease_is_rejected_when_it_resumes(hq, make_workspace, observe) -> None:
    req, job = executing(hq, make_workspace)
    original = subprocess.Popen(
        manage_argv("run_watchers"), env=subprocess_env(PAUSE_AT="purge-claimed"), stdout=subprocess.PIPE, text=True
    )
    proc = psutil.Process(original.pid)
    wait_for(lambda: proc.status() == psutil.STATUS_STOPPED, what="the purge executor paused after its claim")
    job.refresh_from_db()
    assert (job.status, job.lease_generation) == ("queued", 1)
    assert job.lease_expires_at is not None
    later = job.lease_expires_at + timedelta(seconds=1)
    assert purge.run_purge(job.id, now=later, owner="replacement").endswith("done")
    original.send_signal(signal.SIGCONT)
    out, _ = original.communicate(timeout=120)
    assert original.returncode == 0
    assert "rejected: stale executor" in out and "generation 2" in out
    job.refresh_from_db()
    assert (job.status, job.lease_generation) == ("done", 2)
    assert fresh(req).workspace.lifecycle == "deleted"
    assert Decision.objects.filter(request=req, action="purged").count() == 1
    rejected = Decision.objects.get(request=req, action="purge_rejected")
    assert rejected.generation == 1
    alarm = Alarm.objects.get(request=req, kind="purge_stale_executor", resolved_at__isnull=True)
    assert "stale executor purge:" in alarm.message and "generation 1: the job is at generation 2" in alarm.message
    purged = Decision.objects.get(request=req, action="purged")
    said = next(line for line in out.splitlines() if "rejected" in line).strip()[:90]
    observe(
        f"purge executor SIGSTOPped past its lease (generation {rejected.generation}); the replacement took "
        f"generation {purged.generation} and purged; the original, resumed with SIGCONT, said '{said}'; "
        f"purged {Decision.objects.filter(request=req, action='purged').count()} time(s), workspace "
        f"{fresh(req).workspace.lifecycle}"
    )


def test_a_stale_executor_in_another_thread_is_rejected_and_raises_the_alarm(hq, make_workspace) -> None:
    """A late executor (`reject_a_stale_executor`) is rejected, purges nothing, the rejection is
    logged and an open alarm names it."""
    req, job, said = reject_a_stale_executor(hq, make_workspace)
    assert said.endswith("rejected: stale executor executor-a generation 1: the job is at generation 2"), said
    job.refresh_from_db()
    assert (job.status, job.lease_generation) == ("done", 2) and fresh(req).workspace.lifecycle == "deleted"
    assert Decision.objects.filter(request=req, action="purged").count() == 1
    assert Decision.objects.get(request=req, action="purge_rejected").generation == 1
    alarm = Alarm.objects.get(request=req, kind="purge_stale_executor")
    assert alarm.resolved_at is None and alarm.message == (
        "a late purge executor was rejected at the receiving boundary, nothing purged by it: stale executor "
        "executor-a generation 1: the job is at generation 2; find why it paused past its lease (a stopped, "
        "suspended or starved worker)"
    )


def test_a_purge_whose_requester_lost_authority_is_refused_and_purges_nothing(hq, make_workspace) -> None:
    req, job = executing(hq, make_workspace)
    hq.groups.clear()
    assert "refused: requester hq-alice is no longer" in purge.run_purge(job.id, now=timezone.now())
    job.refresh_from_db()
    assert job.status == "refused" and fresh(req).workspace.lifecycle == "deleting"
    assert Alarm.objects.filter(request=req, kind="purge_refused", resolved_at__isnull=True).exists()
    assert Decision.objects.filter(request=req, action="purge_refused").count() == 1


def test_a_repeated_purge_returns_the_first_outcome(hq, make_workspace) -> None:
    req, job = executing(hq, make_workspace)
    assert purge.run_purge(job.id, now=timezone.now()).endswith("done")
    generation = PurgeJob.objects.get(id=job.id).lease_generation
    assert "not claimed" in purge.run_purge(job.id, now=timezone.now())
    # The executor that applied it, asking again, gets the first outcome; a stale one is rejected.
    first = PurgeJob.objects.get(id=job.id)
    assert purge.apply(job.id, owner="x", generation=generation, now=timezone.now()).endswith("already done")
    assert "rejected: stale executor" in purge.apply(job.id, owner="y", generation=generation - 1, now=timezone.now())
    assert PurgeJob.objects.get(id=job.id).finished_at == first.finished_at
    assert Decision.objects.filter(request=req, action="purged").count() == 1


def test_destruction_started_is_delivered_even_when_the_purge_finishes_first(hq, make_workspace) -> None:
    req, job = executing(hq, make_workspace)
    mail.outbox.clear()
    assert purge.run_purge(job.id, now=timezone.now()).endswith("done")
    assert fresh(req).status == "completed"
    run_at(timezone.now())
    assert [m.subject for m in mail.outbox] == ["Deletion of workspace acme-old has started"]


def test_a_failed_gating_notice_has_a_way_forward(hq, make_workspace, monkeypatch, observe) -> None:
    from retirements import notices

    make_workspace()
    T = timezone.now() - timedelta(days=1)
    monkeypatch.setattr(notices, "send_notice", lambda letter, **kw: (_ for _ in ()).throw(OSError("smtp down")))
    req = request_at(T, hq)
    at = T
    for _ in range(6):
        run_at(at)
        at += timedelta(hours=2)
    slot = NoticeSlot.objects.get(request=req, kind="request_received")
    assert (slot.status, slot.attempts) == ("failed", 6)
    failed_attempts = slot.attempts
    alarms_open = Alarm.objects.filter(request=req, slot=slot, kind="notice_failed", resolved_at__isnull=True).count()
    assert alarms_open == 1
    monkeypatch.undo()
    retirement_retry_notices(actor=Actor.of(hq), request_id=req.id, reason="SMTP fixed")
    slot.refresh_from_db()
    assert (slot.status, slot.attempts) == ("pending", 0)
    assert not Alarm.objects.filter(request=req, slot=slot, resolved_at__isnull=True).exists()
    run_at(timezone.now())
    slot.refresh_from_db()
    assert slot.status == "delivered"
    assert Decision.objects.get(request=req, action="retry_notices").actor_label == "hq-alice"
    observe(
        f"request_received failed {failed_attempts} times ({alarms_open} alarm); retry_notices re-armed it "
        f"(attempts 0); the next step left it {slot.status}"
    )


def test_the_retirement_decision_log_is_append_only(hq, make_workspace) -> None:
    from django.db import DatabaseError, connection, transaction

    make_workspace()
    req = request_at(timezone.now(), hq)
    for sql in (
        "UPDATE retirements_decision SET reason = 'rewritten' WHERE request_id = %s",
        "DELETE FROM retirements_decision WHERE request_id = %s",
    ):
        with (
            pytest.raises(DatabaseError, match="evidence rows are never rewritten or deleted"),
            transaction.atomic(),
            connection.cursor() as cur,
        ):
            cur.execute(sql, [req.id])
    assert Decision.objects.get(request=req, action="request").reason == "contract ended"


@pytest.mark.slow
def test_a_watcher_process_killed_mid_step_loses_nothing(hq, make_workspace, observe) -> None:
    make_workspace()
    req = request_at(timezone.now(), hq)
    proc = subprocess.run(manage_argv("run_watchers"), env=subprocess_env(CRASH_AT="watcher-woke"), timeout=120)
    assert proc.returncode == -signal.SIGKILL
    killed = fresh(req)
    assert killed.status == "waiting" and killed.next_wake_at is not None  # the wake-up is durable
    assert NoticeSlot.objects.get(request=req, kind="request_received").status == "pending"
    run_at(timezone.now())  # the next scheduled run picks the step up again
    run_at(timezone.now() + timedelta(minutes=5))
    after = fresh(req)
    assert [m.subject for m in mail.outbox] == ["Retirement requested for workspace acme-old"]
    assert after.status == "waiting" and after.next_wake_at is not None and after.next_wake_at > timezone.now()
    observe(
        f"run_watchers SIGKILLed mid-step: request {killed.status}, wake-up kept; next run sent "
        f"{len(mail.outbox)} notice, next wake {after.next_wake_at:%Y-%m-%d}"
    )


@pytest.mark.slow
def test_a_purge_worker_killed_mid_purge_is_replaced_after_its_lease(hq, make_workspace, observe) -> None:
    req, job = executing(hq, make_workspace)
    proc = subprocess.run(manage_argv("run_watchers"), env=subprocess_env(CRASH_AT="purge-claimed"), timeout=120)
    assert proc.returncode == -signal.SIGKILL
    job.refresh_from_db()
    assert (job.status, job.lease_generation) == ("queued", 1) and job.lease_expires_at is not None
    assert "not claimed" in purge.run_purge(job.id, now=timezone.now())  # its lease still stands
    assert purge.run_purge(job.id, now=job.lease_expires_at + timedelta(seconds=1)).endswith("done")
    job.refresh_from_db()
    assert (job.status, job.lease_generation) == ("done", 2)
    assert fresh(req).workspace.lifecycle == "deleted"
    assert Decision.objects.filter(request=req, action="purged").count() == 1
    observe(f"purge worker SIGKILLed after its claim; replacement took generation {job.lease_generation}; purged once")


def test_retry_notices_with_nothing_failed_is_refused_and_writes_nothing(hq, make_workspace, cmd) -> None:
    from tests.retirements.conftest import retirement_rows

    make_workspace()
    req = request_at(timezone.now(), hq)
    before = retirement_rows()
    ran = cmd("retry_notices", str(req.id), "--by", "hq-alice", "--reason", "smtp fixed")
    assert ran.code == 1 and "has no failed notice to retry" in ran.err
    assert retirement_rows() == before
