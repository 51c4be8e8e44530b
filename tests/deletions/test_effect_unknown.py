"""Effect unknown: a worker that may have submitted is settled from the target system's record."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from deletions.models import DeletionRequest, StageHistory
from tests.conftest import submit_and_approve
from tests.deletions.helpers import believed, crash_at, effects, recorded, take_over

pytestmark = pytest.mark.django_db(transaction=True)


def test_not_found_behind_the_submission_stays_unknown_and_confirm_not_applied_waits_for_the_watermark(
    cmd, settings, observe
) -> None:
    req = submit_and_approve()
    crashed = crash_at("after-submit-mark", req.id)  # killed before the target saw anything
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    assert gate.submitted_at is not None and gate.status == "running" and recorded(gate.operation_id) is None

    settings.RECEIVER_TEST_LOOKUP_LAG_SECONDS = 3600  # the lookup source is an hour behind
    ran = take_over(cmd, crashed)
    assert ran.code == 1 and "retry not before" in ran.err
    after = DeletionRequest.objects.get(id=req.id)
    assert after.status == "retry_wait" and "effect unknown" in (after.last_error or "")
    assert "before the submission" in (after.last_error or "")
    assert f"did operation {gate.operation_id}" in after.open_question and after.owner
    assert effects(req.id) == []  # no blind resend

    refused = cmd("resume_deletion", str(req.id), "--by", "operator-c", "--effect-not-applied", "--reason", "x")
    assert refused.code == 1 and "evidence inconclusive" in refused.err and "seen operations only up to" in refused.err
    assert StageHistory.objects.get(id=gate.id).submitted_at is not None  # nothing recorded
    assert not after.decisions.filter(action="confirm_not_applied").exists()

    settings.RECEIVER_TEST_LOOKUP_LAG_SECONDS = 0  # caught up: its "not found" is now evidence
    resumed = cmd(
        "resume_deletion",
        str(req.id),
        "--by",
        "operator-c",
        "--effect-not-applied",
        "--reason",
        "target caught up and shows nothing for this operation",
    )
    assert resumed.code == 0, resumed.err
    assert cmd("run_deletion", str(req.id), "--executor-id", "worker-d").code == 0
    done = DeletionRequest.objects.get(id=req.id)
    assert done.status == "completed" and done.open_question == ""
    assert [op for op, _, _ in effects(req.id)].count(gate.operation_id) == 1
    assert done.decisions.filter(action="confirm_not_applied", actor_label="operator-c").exists()
    observe(
        f"lookup an hour behind: {after.status}, owner {after.owner}, confirm-not-applied refused "
        f"('{refused.err.strip()[:60]}...'); caught up: confirmed, {done.status}, operation applied "
        f"{[op for op, _, _ in effects(req.id)].count(gate.operation_id)} time"
    )


def test_not_found_past_the_submission_is_evidence_and_the_operation_is_sent_once(cmd, observe) -> None:
    req = submit_and_approve()
    crashed = crash_at("after-submit-mark", req.id)
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    ran = take_over(cmd, crashed)
    assert ran.code == 0, ran.err
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    ops = [op for op, _, _ in effects(req.id)]
    assert ops.count(gate.operation_id) == 1 and len(ops) == len(set(ops)) == 6
    observe(f"not found as of a watermark past the submission: sent once under the same id; {len(ops)} effects")


def test_found_effect_is_saved_from_the_record_without_resending(cmd, observe) -> None:
    req = submit_and_approve()
    crashed = crash_at("after-effect", req.id)
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    evidence = recorded(gate.operation_id)
    assert evidence is not None and evidence["gated"] is True
    assert take_over(cmd, crashed, "--next-step").code == 0
    settled = StageHistory.objects.get(id=gate.id)
    assert settled.status == "completed" and believed(settled.metadata_json["result"]) == evidence
    assert [a for _, a, _ in effects(req.id)] == ["gate_user"]  # the record settled it; nothing was resent
    assert StageHistory.objects.get(request_id=req.id, is_current=True).stage == "purge_db"
    observe(
        f"the target's record settled {settled.stage} ({settled.status}); "
        f"receiver: {[a for _, a, _ in effects(req.id)]}"
    )


def test_operator_cannot_confirm_not_applied_when_the_target_has_the_record(cmd) -> None:
    req = submit_and_approve()
    crashed = crash_at("after-effect", req.id)
    DeletionRequest.objects.filter(id=req.id).update(status="needs_attention", lease_owner=None)
    ran = cmd("resume_deletion", str(req.id), "--by", "operator-c", "--effect-not-applied")
    assert ran.code == 1 and "it was applied; nothing to resend" in ran.err
    assert StageHistory.objects.get(request_id=req.id, stage="gate_user").submitted_at is not None
    assert DeletionRequest.objects.get(id=req.id).status == "needs_attention"
    assert crashed.lease_generation == 1


def test_unknown_effect_is_listed_on_the_operations_overview(cmd, client) -> None:
    from django.contrib.auth.models import User

    req = submit_and_approve()
    dead = crash_at("after-submit-mark", req.id)
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    client.force_login(User.objects.create_superuser("root-1", "r@x.example", "pw"))
    assert dead.lease_expires_at is not None
    with time_machine.travel(dead.lease_expires_at, tick=False):  # the dead worker's heartbeat is late
        page = client.get("/admin/operations/").content.decode()
    assert "deletion demo:alice" in page and str(gate.operation_id) in page


def unknown_case(req) -> str:
    """What a support lead sees of an effect-unknown case, built from the saved rows."""
    from deletions.models import DeletionAlarm

    after = DeletionRequest.objects.get(id=req.id)
    alarm = DeletionAlarm.objects.filter(request_id=req.id, resolved_at__isnull=True).first()
    wait = int((after.next_check_at - after.updated_at).total_seconds()) if after.next_check_at else None
    return (
        f"effects at receiver: {len(effects(req.id))}; status: {after.status} (effect unknown); "
        f"owner: {after.owner}; next check in {wait} s; alarm: {alarm.kind if alarm else 'none'}"
    )


def test_a_source_that_cannot_be_read_keeps_the_effect_unknown_and_alerts_the_owner(
    cmd, settings, observe, admin_client, caplog
) -> None:
    import logging

    req = submit_and_approve()
    crashed = crash_at("after-effect", req.id)  # the effect was applied; its outcome was never saved
    settings.RECEIVER_TEST_UNREADABLE_UNTIL = (timezone.now() + timedelta(hours=1)).isoformat()
    with caplog.at_level(logging.ERROR, logger="deletions"):
        ran = take_over(cmd, crashed)
    alarm_lines = [r for r in caplog.records if r.getMessage() == "alarm" and r.levelno == logging.ERROR]
    assert [(str(r.request_id), r.reason) for r in alarm_lines] == [(str(req.id), "effect_unknown")]
    assert ran.code == 1 and "retry not before" in ran.err
    after = DeletionRequest.objects.get(id=req.id)
    assert after.status == "retry_wait" and "could not be read" in (after.last_error or "")
    assert after.owner and after.open_question and after.next_check_at is not None
    assert len(effects(req.id)) == 1  # never read as "no effect", never resent
    seen = unknown_case(req)
    assert "alarm: effect_unknown" in seen
    overview = admin_client.get("/admin/operations/").content.decode()
    assert f"deletion {req.target}" in overview and "effect_unknown" in overview
    settings.RECEIVER_TEST_UNREADABLE_UNTIL = ""  # the source is back: the next check settles it from the record
    with time_machine.travel((after.next_attempt_at or timezone.now()) + timedelta(seconds=1), tick=False):
        assert cmd("run_deletion", str(req.id), "--executor-id", "worker-c").code == 0
    assert DeletionRequest.objects.get(id=req.id).status == "completed" and len(effects(req.id)) == 6
    assert not after.alarms.filter(resolved_at__isnull=True).exists()
    observe(f"{seen}; after the source came back: settled from its record, alarm cleared, 6 effects, none twice")


def test_a_lagging_lookup_that_says_not_found_is_not_taken_as_no_effect(cmd, settings, observe) -> None:
    req = submit_and_approve()
    crashed = crash_at("after-effect", req.id)
    settings.RECEIVER_TEST_LOOKUP_LAG_SECONDS = 3600  # the record exists but the lookup is an hour behind
    assert take_over(cmd, crashed).code == 1
    seen = unknown_case(req)
    assert "effects at receiver: 1;" in seen and "alarm: effect_unknown" in seen
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    assert gate.submitted_at is not None and gate.status == "failed"  # still unknown: nothing resent
    # The target holds the record: an operator's "not applied" is refused while the lookup lags.
    confirm = cmd("resume_deletion", str(req.id), "--by", "operator-c", "--effect-not-applied", "--reason", "x")
    assert confirm.code == 1 and "evidence inconclusive" in confirm.err
    assert not DeletionRequest.objects.get(id=req.id).decisions.filter(action="confirm_not_applied").exists()
    settings.RECEIVER_TEST_LOOKUP_LAG_SECONDS = 0
    after = DeletionRequest.objects.get(id=req.id)
    with time_machine.travel((after.next_attempt_at or timezone.now()) + timedelta(seconds=1), tick=False):
        assert cmd("run_deletion", str(req.id), "--executor-id", "worker-c").code == 0
    assert len(effects(req.id)) == 6 and not after.alarms.filter(resolved_at__isnull=True).exists()
    observe(f"lookup an hour behind said not found: {seen}; once caught up, settled without a resend")


def test_worker_killed_while_the_source_is_unavailable_leaves_a_case_the_replacement_can_pick_up(
    cmd, settings, observe
) -> None:
    import signal

    from tests.deletions.helpers import start_worker

    req = submit_and_approve()
    down_until = (timezone.now() + timedelta(hours=2)).isoformat()
    worker = start_worker(
        req.id,
        "--executor-id",
        "worker-a",
        CRASH_AT="after-submit-mark",
        RECEIVER_TEST_UNREADABLE_UNTIL=down_until,
    )
    worker.communicate(timeout=60)
    assert worker.returncode == -signal.SIGKILL
    settings.RECEIVER_TEST_UNREADABLE_UNTIL = down_until  # still down for the replacement
    crashed = DeletionRequest.objects.get(id=req.id)
    ran = take_over(cmd, crashed)
    assert ran.code == 1
    found = DeletionRequest.objects.get(id=req.id)
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    assert gate.submitted_at is not None and gate.status == "failed"  # the same row, still unknown
    assert "could not be read" in (found.last_error or "")  # the evidence it checked
    assert f"did operation {gate.operation_id}" in found.open_question and found.owner
    assert found.next_check_at is not None and found.next_check_at > timezone.now()  # the next safe read
    assert effects(req.id) == []
    observe(
        f"worker-a killed with the source down; the replacement (generation {found.lease_generation}) found "
        f"{gate.stage} unknown, evidence '{(found.last_error or '')[-60:]}', owner {found.owner}, "
        f"next read {found.next_check_at:%H:%M:%S}; effects at receiver: {len(effects(req.id))}"
    )


def test_a_cancel_while_the_effect_is_unknown_keeps_the_case_open_until_the_lookup_names_the_operation(
    cmd, settings, observe
) -> None:
    req = submit_and_approve()
    crashed = crash_at("after-effect", req.id)  # the gate was applied; its outcome was never saved
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    settings.RECEIVER_TEST_UNREADABLE_UNTIL = (timezone.now() + timedelta(hours=1)).isoformat()
    assert take_over(cmd, crashed).code == 1
    ran = cmd("cancel_deletion", str(req.id), "--by", "operator-c", "--reason", "customer withdrew")
    assert ran.code == 0, ran.err
    held = DeletionRequest.objects.get(id=req.id)
    # Saved, but not claimed as prevented: open, owned, checked now, its alarm still open.
    assert held.status == "retry_wait" and held.cancel_requested_at is not None
    assert held.owner == "operators on call" and held.next_check_at is not None
    assert str(gate.operation_id) in held.open_question
    assert held.alarms.filter(resolved_at__isnull=True, kind="effect_unknown").count() == 1

    settings.RECEIVER_TEST_UNREADABLE_UNTIL = ""  # the lookup finds the effect
    ran = cmd("run_deletion", str(req.id), "--executor-id", "worker-c")
    assert ran.code == 1 and "request cancelled" in ran.err
    done = DeletionRequest.objects.get(id=req.id)
    assert done.status == "cancelled"
    assert f"cancelled after operation {gate.operation_id} (gate_user) was applied" in done.last_action
    assert "reversal needs a separate authorized action" in done.last_action
    assert not done.alarms.filter(resolved_at__isnull=True).exists()
    assert [a for _, a, _ in effects(req.id)] == ["gate_user"]
    observe(f"cancel while unknown: {held.status}, owner {held.owner}, alarm open; then: {done.last_action}")


def test_a_cancel_that_meets_a_dead_workers_live_lease_waits_for_it_and_leaves_no_row_running(cmd, observe) -> None:
    req = submit_and_approve()
    crashed = crash_at("after-submit-mark", req.id)  # killed before the target saw anything; lease still live
    ran = cmd("cancel_deletion", str(req.id), "--by", "operator-c", "--reason", "legal asked to stop")
    assert ran.code == 0, ran.err
    assert DeletionRequest.objects.get(id=req.id).status == "running"  # open until the operation is looked up
    ran = take_over(cmd, crashed)
    assert ran.code == 1 and "request cancelled" in ran.err
    done = DeletionRequest.objects.get(id=req.id)
    assert done.status == "cancelled" and done.last_action == "cancelled before any effect"
    rows = StageHistory.objects.filter(request_id=req.id)
    assert not rows.filter(status="running").exists()
    assert not done.attempts.filter(outcome="running").exists()
    assert effects(req.id) == []
    observe(f"cancel met a dead worker's live lease: after it expired, {done.last_action}; rows running: 0")


def test_only_a_submitted_unsettled_stage_reads_as_effect_unknown(cmd) -> None:
    """A worker killed before it submitted anything leaves a queued case, not an unknown effect;
    one killed after it submitted leaves an unknown effect, on the panel and the overview alike."""
    import signal

    from deletions import case, selectors
    from ops import overview
    from tests.deletions.helpers import running_row, start_worker
    from tests.support import wait_for

    quiet = submit_and_approve("demo:killed-before-submitting")
    worker = start_worker(quiet.id, "--executor-id", "worker-a", "--stage-delay-ms", "60000")
    wait_for(lambda: running_row(quiet.id), what="gate_user running, waiting before it submits")
    worker.send_signal(signal.SIGKILL)
    worker.communicate(timeout=60)
    loud = crash_at("after-submit-mark", submit_and_approve("demo:killed-after-submitting").id)
    later = (loud.lease_expires_at or timezone.now()) + timedelta(seconds=5)
    listed = {s.request_id for s, _ in overview.effect_unknown(later)}
    assert listed == {loud.id}
    for req, unknown in ((DeletionRequest.objects.get(id=quiet.id), False), (loud, True)):
        assert selectors.unsettled(req.id) is unknown
        shown = case.story(req, later, selectors.unsettled(req.id))
        if unknown:
            assert "effect is unknown" in shown.question and shown.owner.startswith("operators on call")
        else:
            assert shown.question.startswith("queued, waiting for a free worker (for ")
            assert shown.owner.startswith("system: the next free worker")


def test_a_dead_workers_submitted_effect_reads_the_same_on_every_face_while_its_lease_runs(
    cmd, client, settings
) -> None:
    """One truth per case: while a worker that submitted an effect is dead but its lease still
    runs, the overview, the case page, the command's JSON and the API all read "not reporting
    since" its last beat once it missed three heartbeats; just after the kill (its heartbeat still
    on time) none does."""
    from django.contrib.auth.models import User
    from django.urls import reverse

    from core import present, tokens
    from ops import overview

    dead = crash_at("after-submit-mark", submit_and_approve("demo:late-worker").id)
    assert dead.lease_expires_at is not None and dead.heartbeat_at is not None
    fresh = dead.heartbeat_at + timedelta(seconds=1)
    late = dead.heartbeat_at + timedelta(seconds=3 * settings.DELETION_HEARTBEAT_SECONDS)  # lease still live
    assert late < dead.lease_expires_at
    root = User.objects.create_superuser("root-5", "root-5@hq.example", "pw")
    client.force_login(root)
    token = tokens.issue(root, name="faces", scope="read")
    words = f"not reporting since {present.absolute(dead.heartbeat_at)}"
    for at, unknown in ((fresh, False), (late, True)):
        with time_machine.travel(at, tick=False):
            listed = dead.id in {s.request_id for s, _ in overview.effect_unknown(at)}
            page = client.get(reverse("admin:deletions_deletionrequest_change", args=[dead.id])).content.decode()
            shown = cmd("show_deletion", str(dead.id), "--json")
            api = client.get(f"/api/v1/deletions/{dead.id}", HTTP_AUTHORIZATION=f"Bearer {token}").json()
        said = [json.loads(shown.out)["request"]["open_question"], api["request"]["open_question"]]
        assert listed is unknown
        assert (words in page) is unknown and all((words in q) is unknown for q in said), (at, said)
        if unknown:
            assert f"when its lease lapses at {present.absolute(dead.lease_expires_at)}" in said[0]
            assert "Open question: none" not in page


def test_the_timeline_says_a_lease_taken_over_was_never_released() -> None:
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from deletions import case

    t = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    events = [
        SimpleNamespace(at=t + timedelta(minutes=n), event=e, generation=g, owner="w", previous_owner="")
        for n, (e, g) in enumerate([("claim", 1), ("release", 1), ("claim", 2), ("release", 2), ("claim", 3)])
    ]
    events.append(SimpleNamespace(at=t + timedelta(minutes=9), event="takeover", generation=4, owner="v",
                                  previous_owner="w"))  # fmt: skip
    lines = [m.what for m in case.timeline([], events)]
    assert lines == ["claimed the lease 3 times and released it 2 times", "took over an expired lease"]
