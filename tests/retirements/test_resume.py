"""Resume replaces a stalled watcher; a superseded watcher never acts; stalls raise alarms."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from core import clock
from core.authority import Actor
from core.errors import Refused
from ops.health import report
from retirements import watcher as watcher_module
from retirements.models import NoticeSlot, PurgeJob, RetirementWatcher
from retirements.selectors import detect_stalls
from retirements.services import retirement_hold, retirement_resume
from retirements.watcher import step
from tests.retirements.helpers import fresh, request_at, run_at
from tests.support import force

pytestmark = pytest.mark.django_db
T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def test_resume_is_refused_while_the_watcher_runs(hq, make_workspace, cmd, observe) -> None:
    make_workspace()
    req = request_at(T, hq)
    run_at(T)  # the watcher starts and heartbeats
    with time_machine.travel(T + timedelta(minutes=1), tick=False):
        ran = cmd("resume_retirement", str(req.id), "--by", "hq-alice", "--reason", "watcher stalled")
    assert ran.code == 1 and "the watcher is healthy: its next wake-up is" in ran.err, ran.err
    assert RetirementWatcher.objects.filter(request=req).count() == 1
    observe(f"resume 1 min after the heartbeat: exit {ran.code}, '{ran.err.strip()[:40]}...', 1 watcher")


def test_never_started_watcher_is_stalled_and_resume_replaces_it(hq, make_workspace, cmd) -> None:
    make_workspace()
    req = request_at(T, hq)  # the enqueue was lost: nobody runs it
    assert detect_stalls(now=T + timedelta(minutes=14)) == []
    stalled = detect_stalls(now=T + timedelta(minutes=16))
    assert [(r.id, why.split(" (")[0]) for r, why in stalled] == [(req.id, "watcher never started")]

    old = req.watcher_id
    with time_machine.travel(T + timedelta(minutes=16), tick=False):
        ran = cmd("resume_retirement", str(req.id), "--by", "hq-alice", "--reason", "watcher stalled")
    assert ran.code == 0, ran.err
    watchers = json.loads(ran.out)["watchers"]
    assert [(w["status"], w["authoritative"]) for w in watchers] == [("superseded", False), ("pending", True)]
    after = fresh(req)
    assert after.watcher_id != old and after.eligible_at == req.eligible_at
    assert after.watcher is not None and after.watcher.replaces_id == old


def test_resume_keeps_holds_eligibility_and_gating_notices(hq, make_workspace) -> None:
    make_workspace()
    req = request_at(T, hq)
    with time_machine.travel(T + DAY, tick=False):
        retirement_hold(actor=Actor.of(hq), request_id=req.id, reason="legal review")
    slots_before = list(NoticeSlot.objects.filter(request=req).values_list("kind", "status", "due_at"))
    with time_machine.travel(T + 40 * DAY, tick=False):
        with pytest.raises(Refused, match="the watcher sleeps while the request is on hold"):
            retirement_resume(actor=Actor.of(hq), request_id=req.id, reason="watcher stalled")
        force(RetirementWatcher.objects.filter(request=req), status="settled")  # a crash or a hand fix
        retirement_resume(actor=Actor.of(hq), request_id=req.id, reason="watcher stalled")
    after = fresh(req)
    assert after.status == "held" and after.hold_reason == "legal review"
    assert after.eligible_at == req.eligible_at
    assert list(NoticeSlot.objects.filter(request=req).values_list("kind", "status", "due_at")) == slots_before
    run_at(T + 40 * DAY)
    assert not PurgeJob.objects.exists() and fresh(req).status == "held"


def test_superseded_watcher_woken_later_does_nothing_destructive(hq, make_workspace, observe) -> None:
    make_workspace()
    req = request_at(T, hq)
    old = req.watcher_id
    assert old is not None
    with time_machine.travel(T + timedelta(minutes=20), tick=False):
        retirement_resume(actor=Actor.of(hq), request_id=req.id, reason="watcher stalled")
    new = fresh(req).watcher_id
    assert step(old, now=T + 31 * DAY) == "watcher superseded"
    assert not PurgeJob.objects.exists() and fresh(req).workspace.lifecycle == "deletion_pending"
    # Even if it had not been marked yet, a non-authoritative watcher settles without action.
    force(RetirementWatcher.objects.filter(id=old), status="running")
    assert step(old, now=T + 31 * DAY) == "superseded"
    assert not PurgeJob.objects.exists()
    assert RetirementWatcher.objects.get(id=old).conclusion == "superseded watcher woke; no action taken"
    # The authoritative watcher proceeds (its final warning on time, a day before eligibility).
    run_at(T + 29 * DAY)
    run_at(T + 31 * DAY)
    assert fresh(req).watcher_id == new and fresh(req).workspace.lifecycle == "deleted"
    observe(
        f"superseded watcher woke twice: no purge job, conclusion "
        f"'{RetirementWatcher.objects.get(id=old).conclusion}'; the authoritative one purged "
        f"({PurgeJob.objects.count()} job)"
    )


def test_watcher_that_keeps_failing_is_reported_stalled_with_an_alarm(
    hq, make_workspace, monkeypatch, caplog, observe
) -> None:
    make_workspace()
    req = request_at(T, hq)

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    # Every step beats, then fails at its boundary: alive (resume would not help), and failing.
    monkeypatch.setattr(watcher_module, "_conclude", broken)
    run_at(T)
    assert not req.alarms.exists()
    with caplog.at_level(logging.ERROR, logger="retirements"):
        summary = run_at(T + timedelta(minutes=16))
    assert summary["steps"] == {str(req.id): "error"}
    assert summary["stalled"] == [] and summary["failing"] == [str(req.id)]
    alarm = req.alarms.get(kind="watcher_failing")
    assert "missed its wake-up" in alarm.message and "RuntimeError: boom" in alarm.message
    assert alarm.resolved_at is None
    with time_machine.travel(T + timedelta(minutes=16), tick=False):
        assert report(clock.now())["checks"]["failing_watchers"] == {"ok": False, "count": 1}
    observe(f"watcher failing 16 min: alarm '{alarm.message[:50]}...'")
    assert any("alarm kind=watcher_failing" in r.getMessage() for r in caplog.records)
    run_at(T + timedelta(minutes=17))  # still failing: the same alarm, not a second one
    assert req.alarms.filter(kind="watcher_failing").count() == 1
    monkeypatch.undo()
    run_at(T + timedelta(minutes=18))
    assert req.alarms.get(kind="watcher_failing").resolved_at is not None
