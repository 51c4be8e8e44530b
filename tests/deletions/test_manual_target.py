"""A target that enforces nothing (a `manual:` one, deleted by hand in a vendor's console) runs
review-only: each effect, under a current approval and a minted grant, waits for an operator, who
records applied (with evidence) or not applied; the case believes only those records."""

from __future__ import annotations

import json

import pytest

from deletions.models import DeletionAlarm, DeletionRequest, OperatorRecord, StageHistory
from tests.conftest import submit_and_approve

pytestmark = pytest.mark.django_db(transaction=True)

TARGET = "manual:vendor-crm/alice@example.com"


def waiting(request_id) -> tuple[DeletionRequest, StageHistory]:
    case = DeletionRequest.objects.get(id=request_id)
    row = case.stages.get(is_current=True)
    assert case.status == "needs_attention" and case.owner == "operators on call" and case.next_check_at
    assert row.submitted_at is not None and row.status == "failed"
    assert case.open_question.startswith(f"apply {row.stage}") and str(row.operation_id) in case.open_question
    assert f"record_effect {case.id}" in case.open_question
    assert DeletionAlarm.objects.filter(request_id=case.id, kind="effect_unknown", resolved_at__isnull=True).exists()
    return case, row


def record(cmd, request_id, *flags: str) -> dict:
    ran = cmd("record_effect", str(request_id), "--by", "operator-c", *flags)
    assert ran.code == 0, ran.err
    return json.loads(ran.out)


def test_each_effect_waits_for_an_operator_who_records_it(cmd, observe) -> None:
    req = submit_and_approve(TARGET)
    ran = cmd("run_deletion", str(req.id), "--executor-id", "worker-a")
    assert ran.code == 1 and "waiting for an operator: apply gate_user" in ran.err, ran.err
    case, gate = waiting(req.id)
    assert gate.stage == "gate_user" and "by hand in a vendor's console" in case.open_question
    # The worker named a person from the operators on call as it handed the effect over: no custody
    # pass has run, and the case is never held by a group.
    assert case.assigned_for == "needs_attention:operators on call"
    assert case.assignee is not None and case.backup is not None and case.assignee_id != case.backup_id
    # Nothing was sent anywhere: the operator applies it, and records what they saw.
    record(cmd, req.id, "--applied", "--evidence", "CRM ticket 4711: login disabled")
    assert cmd("run_deletion", str(req.id), "--executor-id", "worker-a").code == 1
    case, purge = waiting(req.id)
    assert purge.stage == "purge_db" and "--has-agents yes|no" in case.open_question
    # The operator could not do it at first: recorded as not applied, the effect is handed over again.
    record(cmd, req.id, "--not-applied", "--evidence", "console down for maintenance")
    assert cmd("run_deletion", str(req.id), "--executor-id", "worker-a").code == 1
    _, row = waiting(req.id)
    assert row.id == purge.id and row.operation_id == purge.operation_id
    record(cmd, req.id, "--applied", "--evidence", "34 messages deleted, export attached", "--has-agents", "no")
    done = cmd("run_deletion", str(req.id), "--executor-id", "worker-a")
    assert done.code == 0, done.err
    case = DeletionRequest.objects.get(id=req.id)
    assert case.status == "completed"
    results = {s.stage: s.metadata_json["result"] for s in case.stages.all()}
    assert results["gate_user"]["evidence"] == "CRM ticket 4711: login disabled"
    assert results["purge_db"] == {
        "applied_at": results["purge_db"]["applied_at"],
        "recorded_by": "operator-c",
        "evidence": "34 messages deleted, export attached",
        "has_agents": False,
    }
    assert set(results) == {"gate_user", "purge_db"}  # no agents left: no purge_agents stage
    assert OperatorRecord.objects.filter(request_id=req.id).count() == 3
    assert not DeletionAlarm.objects.filter(request_id=req.id, resolved_at__isnull=True).exists()
    observe(
        f"manual target: {OperatorRecord.objects.filter(request_id=req.id).count()} operator records "
        f"(one 'not applied', handed over again); {case.status} with the operators' evidence as each stage's result"
    )


def test_a_record_is_refused_when_nothing_waits_for_a_person_or_the_target_records_its_own(cmd, admin_client) -> None:
    req = submit_and_approve(TARGET)
    page = admin_client.get(f"/admin/deletions/deletionrequest/{req.id}/change/").content.decode()
    assert "the account in vendor-crm (deleted by hand" in page
    early = cmd("record_effect", str(req.id), "--by", "operator-c", "--applied", "--evidence", "done")
    assert early.code == 1 and "has no effect waiting for an operator" in early.err, early.err
    cmd("run_deletion", str(req.id), "--executor-id", "worker-a")
    waiting(req.id)
    page = admin_client.get(f"/admin/deletions/deletionrequest/{req.id}/change/").content.decode()
    assert f"record_effect {req.id}" in page
    blank = cmd("record_effect", str(req.id), "--by", "operator-c", "--applied", "--evidence", "   ")
    assert blank.code == 2 and "evidence is required" in blank.err, blank.err
    stray = cmd(
        "record_effect", str(req.id), "--by", "operator-c", "--applied", "--evidence", "x", "--has-agents", "no"
    )
    assert stray.code == 2 and "an applied purge_db left; this is gate_user" in stray.err, stray.err
    nobody = cmd("record_effect", str(req.id), "--by", "nobody", "--applied", "--evidence", "done")
    assert nobody.code != 0 and OperatorRecord.objects.count() == 0
    record(cmd, req.id, "--applied", "--evidence", "blocked")
    cmd("run_deletion", str(req.id), "--executor-id", "worker-a")
    branchless = cmd("record_effect", str(req.id), "--by", "operator-c", "--applied", "--evidence", "deleted")
    assert branchless.code == 2 and "--has-agents yes|no" in branchless.err, branchless.err
    assert OperatorRecord.objects.count() == 1
    demo = submit_and_approve("demo:records-its-own")
    own = cmd("record_effect", str(demo.id), "--by", "operator-c", "--applied", "--evidence", "done")
    assert own.code == 1 and "records its own evidence" in own.err, own.err


def test_the_console_offers_recording_the_effect_and_records_it(cmd, admin_client) -> None:
    req = submit_and_approve(TARGET)
    cmd("run_deletion", str(req.id), "--executor-id", "worker-a")
    _, gate = waiting(req.id)
    page = admin_client.get(f"/admin/deletions/deletionrequest/{req.id}/change/").content.decode()
    assert "Record effect applied by hand" in page and ">Resume<" not in page
    url = f"/admin/deletions/deletionrequest/{req.id}/record/"
    form = admin_client.get(url).content.decode()
    assert "I applied it by hand" in form and "purge_db: agents left" in form
    refused = admin_client.post(url, {"outcome": "applied", "evidence": ""})
    assert refused.status_code == 200 and OperatorRecord.objects.count() == 0
    done = admin_client.post(url, {"outcome": "applied", "evidence": "CRM ticket 4712: login disabled"})
    assert done.status_code == 302
    saved = OperatorRecord.objects.get()
    assert (saved.operation_id, saved.applied, saved.evidence, saved.recorded_by) == (
        gate.operation_id,
        True,
        "CRM ticket 4712: login disabled",
        "admin",
    )
    assert DeletionRequest.objects.get(id=req.id).status == "retry_wait"


def test_an_effect_recorded_after_the_approval_was_revoked_is_kept_and_sent_to_review(cmd) -> None:
    """Supervised effects under the same rules: the requester may not record their own request's
    effect; a record made after the approval was revoked is kept as a fact, raises an alarm and
    holds the case for review ("applied after the approval was revoked"), never a completion."""
    from core.authority import named
    from deletions.services import deletion_revoke_approval

    req = submit_and_approve(TARGET)  # submitted by operator-a
    cmd("run_deletion", str(req.id), "--executor-id", "worker-a")
    waiting(req.id)
    own = cmd("record_effect", str(req.id), "--by", "operator-a", "--applied", "--evidence", "done it myself")
    assert own.code == 1 and "four eyes: operator-a submitted this request" in own.err, own.err
    assert not OperatorRecord.objects.filter(request_id=req.id).exists()
    deletion_revoke_approval(actor=named("operator-b"), request_id=req.id, reason="the requester withdrew consent")
    after = DeletionRequest.objects.get(id=req.id)
    assert after.status == "needs_attention", after.status
    record(cmd, req.id, "--applied", "--evidence", "CRM ticket 4712: login disabled anyway")
    case = DeletionRequest.objects.get(id=req.id)
    assert OperatorRecord.objects.filter(request_id=req.id).count() == 1  # the fact is kept
    assert case.status == "needs_attention" and case.owner == "approvers"
    assert case.open_question.startswith("applied after approval was revoked at")
    alarm = DeletionAlarm.objects.get(request_id=req.id, kind="applied_after_withdrawal", resolved_at__isnull=True)
    assert "the record is kept" in alarm.message
    # Nothing completes it: resume is refused, and the worker finds nothing to run.
    resumed = cmd("resume_deletion", str(req.id), "--by", "operator-c", "--reason", "go on")
    assert resumed.code == 1 and "applied by hand after the approval was withdrawn" in resumed.err, resumed.err
    assert DeletionRequest.objects.get(id=req.id).status == "needs_attention"
    health = json.loads(cmd("health", "--json").out)
    assert health["checks"]["integrity_faults"] == {"ok": False, "count": 1}
