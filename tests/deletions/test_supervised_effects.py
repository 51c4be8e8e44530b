"""One record per supervised effect, and no way round its alarm (issue 51 item 2): an effect recorded by
hand after the approval was revoked is final, holds the case for the approvers and raises an alarm that
no approval, resume or cancel clears; a named person closes it with a reason (a decision row), and the
case ends cancelled, never completed, whatever writes the database."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from core.authority import named
from core.errors import BadInput, NotAllowed, Refused
from deletions.models import DeletionAlarm, DeletionDecision, DeletionRequest, OperatorRecord, Status
from deletions.services import (
    deletion_approve,
    deletion_close_alarm,
    deletion_correct_effect,
    deletion_revoke_approval,
)
from tests.architecture.test_application_role import as_role, refused
from tests.conftest import submit_and_approve
from tests.support import force

pytestmark = pytest.mark.django_db(transaction=True)

TARGET = "manual:vendor-crm/alice@example.com"
AFTER = "applied_after_withdrawal"


def one_line(message: str) -> str:
    assert "\n" not in message and "Traceback" not in message, message
    return message


def open_alarm(request_id) -> DeletionAlarm | None:
    return DeletionAlarm.objects.filter(request_id=request_id, kind=AFTER, resolved_at__isnull=True).first()


def health(cmd) -> dict:
    return json.loads(cmd("health", "--json").out)["checks"]["integrity_faults"]


def test_an_effect_recorded_after_revocation_is_final_and_its_case_is_cancelled_never_completed(cmd) -> None:
    req = submit_and_approve(TARGET)  # submitted by operator-a, approved by operator-b
    assert cmd("run_deletion", str(req.id), "--executor-id", "worker-a").code == 1  # handed to a person
    deletion_revoke_approval(actor=named("operator-b"), request_id=req.id, reason="the requester withdrew consent")

    # 1. An operator records the effect applied by hand anyway: kept, alarmed, held for the approvers.
    first = cmd("record_effect", str(req.id), "--by", "operator-c", "--applied", "--evidence", "ticket 4712: done")
    assert first.code == 0, first.err
    case: Any = DeletionRequest.objects.select_related("assignee", "backup").get(id=req.id)
    assert case.status == Status.NEEDS_ATTENTION and case.owner == "approvers" and open_alarm(req.id)
    # Held for the approvers: named from their rota, and never the submitter.
    assert case.assigned_for == "needs_attention:approvers"
    assert {case.assignee.username, case.backup.username} == {"operator-b", "operator-c"}

    # 2. A second record for the same operation is refused, whoever makes it; the first stands.
    for who, outcome in (("operator-c", "--not-applied"), ("operator-b", "--not-applied"), ("operator-b", "--applied")):
        again = cmd("record_effect", str(req.id), "--by", who, outcome, "--evidence", "second thoughts")
        assert again.code == 1 and "a record is final" in one_line(again.err), again.err
    assert list(OperatorRecord.objects.filter(request_id=req.id).values_list("applied", flat=True)) == [True]

    # 3. Approving again is refused while the alarm is open (whatever state the case is put in), by
    # the service and by the database.
    with pytest.raises(Refused):
        deletion_approve(actor=named("operator-b"), request_id=req.id, digest=req.inventory_digest)
    force(DeletionRequest.objects.filter(id=req.id), status=Status.NEEDS_REVIEW)  # as if something moved it
    with pytest.raises(Refused, match="applied by hand after the approval was withdrawn") as no:
        deletion_approve(actor=named("operator-b"), request_id=req.id, digest=req.inventory_digest)
    one_line(no.value.message)
    with as_role() as conn:
        said = refused(conn, "UPDATE entity_deletion_requests SET status = 'approved' WHERE id = %s", req.id)
    assert f"an open {AFTER} alarm stops it from being approved" in said, said
    force(DeletionRequest.objects.filter(id=req.id), status=Status.NEEDS_ATTENTION)
    resumed = cmd("resume_deletion", str(req.id), "--by", "operator-b", "--reason", "go on")
    assert resumed.code == 1 and "cannot be resumed" in one_line(resumed.err)

    # 4. A correction is a new record, linked, by an approver who did not make the first; both are kept.
    with pytest.raises(Refused, match="operator-c made that record"):
        deletion_correct_effect(
            actor=named("operator-c"), request_id=req.id, applied=False, evidence="x", reason="my mistake"
        )
    deletion_correct_effect(
        actor=named("operator-b"),
        request_id=req.id,
        applied=True,
        evidence="CRM audit log: login disabled 10:02 by operator-c",
        reason="checked the vendor's audit log",
    )
    first_record, correction = OperatorRecord.objects.filter(request_id=req.id).order_by("recorded_at", "id")
    assert correction.corrects_id == first_record.id and correction.recorded_by == "operator-b"
    assert open_alarm(req.id) is not None  # a correction closes nothing

    # 5. The alarm cannot be closed by the application's own writes, nor by a cancel.
    with as_role() as conn:
        said = refused(conn, "UPDATE entity_deletion_alarms SET resolved_at = now() WHERE request_id = %s", req.id)
    assert "closed only by a person's close_alarm decision" in said, said
    cancelled = cmd("cancel_deletion", str(req.id), "--by", "operator-b", "--reason", "the requester withdrew")
    assert cancelled.code == 0, cancelled.err
    # The submitted effect is settled first (the record says applied): the case closes cancelled, naming it.
    ended = cmd("run_deletion", str(req.id), "--executor-id", "worker-b")
    assert ended.code == 1 and "request cancelled" in ended.err, ended.err
    case = DeletionRequest.objects.get(id=req.id)
    assert case.status == Status.CANCELLED and "was applied" in case.last_action, case.last_action
    assert open_alarm(req.id) is not None and health(cmd) == {"ok": False, "count": 1}

    # 6. Closing it needs a named person allowed to, with a reason, and not the one who recorded it.
    support = User.objects.create_user("support-7", is_staff=True)
    support.groups.add(Group.objects.get(name="support (read-only)"))
    with pytest.raises(NotAllowed):
        deletion_close_alarm(actor=named("support-7"), request_id=req.id, reason="looked")
    with pytest.raises(BadInput, match="reason"):
        deletion_close_alarm(actor=named("operator-b"), request_id=req.id, reason="  ")
    for who, why in (("operator-a", "four eyes: operator-a submitted"), ("operator-c", "operator-c recorded")):
        with pytest.raises(Refused, match=why) as no:
            deletion_close_alarm(actor=named(who), request_id=req.id, reason="looked")
        one_line(no.value.message)
    ran = cmd(
        "close_alarm", str(req.id), "--by", "operator-b", "--reason", "vendor confirms: login disabled after revocation"
    )
    assert ran.code == 0, ran.err
    alarm = DeletionAlarm.objects.get(request_id=req.id, kind=AFTER)
    decision = DeletionDecision.objects.get(request_id=req.id, action="close_alarm")
    assert alarm.resolved_at is not None and alarm.decision_id == decision.id
    assert decision.actor_label == "operator-b" and decision.actor is not None
    assert decision.reason == f"{AFTER}: vendor confirms: login disabled after revocation"
    assert health(cmd) == {"ok": True, "count": 0}
    again = cmd("close_alarm", str(req.id), "--by", "operator-b", "--reason", "twice")
    assert again.code == 2 and "nothing to close" in again.err, again.err

    # 7. Never completed: the database refuses it, its alarm closed or not.
    force(DeletionRequest.objects.filter(id=req.id), status=Status.RUNNING)  # as a restore might leave it
    with as_role() as conn:
        said = refused(conn, "UPDATE entity_deletion_requests SET status = 'completed' WHERE id = %s", req.id)
    assert "such a case is cancelled, never completed" in said, said
    force(DeletionRequest.objects.filter(id=req.id), status=Status.CANCELLED)
    assert DeletionRequest.objects.get(id=req.id).completed_at is None


def test_an_integrity_fault_outlives_a_cancel_and_closes_only_by_a_named_decision(cmd) -> None:
    """Cancelling a case no longer closes its integrity alarm as a side effect."""
    req = submit_and_approve("demo:tampered")
    with as_role() as conn:  # what the integrity check raises; the application's role may insert alarms
        conn.execute(
            "INSERT INTO entity_deletion_alarms (request_id, kind, message, created_at)"
            " VALUES (%s, 'integrity_fault', 'the saved inventory no longer matches its digest', now())",
            [req.id],
        )
    assert cmd("cancel_deletion", str(req.id), "--by", "operator-c", "--reason", "investigating").code == 0
    alarm = DeletionAlarm.objects.get(request_id=req.id, kind="integrity_fault")
    assert alarm.resolved_at is None and health(cmd) == {"ok": False, "count": 1}
    closed = cmd("close_alarm", str(req.id), "--by", "operator-c", "--reason", "restored from the audited backup")
    assert closed.code == 0, closed.err
    alarm.refresh_from_db()
    assert alarm.resolved_at is not None and alarm.decision is not None and alarm.decision.actor_label == "operator-c"


def test_the_case_page_offers_closing_a_fault_and_records_who_closed_it(admin_client) -> None:
    req = submit_and_approve("demo:faulted-page")
    with as_role() as conn:
        conn.execute(
            "INSERT INTO entity_deletion_alarms (request_id, kind, message, created_at)"
            " VALUES (%s, 'integrity_fault', 'an approval that fails its own check', now())",
            [req.id],
        )
    page = admin_client.get(f"/admin/deletions/deletionrequest/{req.id}/change/").content.decode()
    assert "Close alarm" in page and f"/admin/deletions/deletionrequest/{req.id}/close-alarm/" in page
    url = f"/admin/deletions/deletionrequest/{req.id}/close-alarm/"
    blank = admin_client.post(url, {"kind": "integrity_fault", "reason": ""})
    assert blank.status_code == 200 and open_alarm_of(req.id, "integrity_fault")
    done = admin_client.post(url, {"kind": "integrity_fault", "reason": "the approval row was restored"})
    assert done.status_code == 302 and not open_alarm_of(req.id, "integrity_fault")
    decision = DeletionDecision.objects.get(request_id=req.id, action="close_alarm")
    assert decision.actor_label == "admin" and decision.reason == "integrity_fault: the approval row was restored"


def open_alarm_of(request_id, kind: str) -> bool:
    return DeletionAlarm.objects.filter(request_id=request_id, kind=kind, resolved_at__isnull=True).exists()
