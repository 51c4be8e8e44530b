"""Custody the database holds (issue 51 item 6): an open case waiting on people has a named person, a
different backup from the rota that may act, and a next check; neither is someone the case's own rules
would refuse (its submitter, a read-only support user). Written directly as the application's role, the
database refuses each breach; through the services, each is a one-line refusal."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from core.authority import Actor, named
from core.errors import Refused
from deletions.models import DeletionRequest, Status
from deletions.services import deletion_custody, deletion_name_by_rota, deletion_revoke_approval, deletion_submit
from retirements.models import RetirementRequest
from retirements.services import retirement_custody, retirement_hold
from tests.architecture.test_application_role import as_role, refused
from tests.conftest import submit_and_approve

pytestmark = pytest.mark.django_db(transaction=True)

UPDATE = "UPDATE entity_deletion_requests SET {} WHERE id = %s"
RETIRE = "UPDATE retirements_retirementrequest SET {} WHERE id = %s"


def fresh(req: Any) -> Any:
    return DeletionRequest.objects.select_related("assignee", "backup", "requested_by_user").get(id=req.id)


def one_line(message: str) -> str:
    assert "\n" not in message and "Traceback" not in message, message
    return message


@pytest.fixture
def support() -> User:
    user = User.objects.create_user("support-9", is_staff=True)
    user.groups.add(Group.objects.get(name="support (read-only)"))
    return user


def needs_attention(cmd) -> Any:
    """A manual target's case, handed to a person: its one action (recording the effect) is four eyes."""
    req = submit_and_approve("manual:vendor-crm/bob@example.com")  # submitted by operator-a
    assert cmd("run_deletion", str(req.id), "--executor-id", "worker-a").code == 1
    case = fresh(req)
    assert case.status == Status.NEEDS_ATTENTION and case.assigned_for == "needs_attention:operators on call"
    return case


def test_a_case_handed_to_a_person_names_two_who_may_act_and_never_its_submitter(cmd) -> None:
    case = needs_attention(cmd)
    # operator-a is on the operators' rota, but submitted it: never its person nor its backup.
    assert {case.assignee.username, case.backup.username} == {"operator-b", "operator-c"}
    assert case.next_check_at is not None


def test_the_database_refuses_a_waiting_case_without_a_person_a_backup_or_a_next_check(cmd, support) -> None:
    case = needs_attention(cmd)
    submitter = case.requested_by_user
    with as_role() as conn:
        for change, words in (
            ("assignee_id = NULL", "deletion_named_case_has_person_and_backup"),
            ("backup_id = NULL", "deletion_named_case_has_person_and_backup"),
            ("assignee_id = NULL, backup_id = NULL", "deletion_named_case_has_person_and_backup"),
            ("next_check_at = NULL", "deletion_waiting_has_a_next_check"),
            ("assigned_for = 'needs_attention:system', assignee_id = NULL, backup_id = NULL", "held_by_people"),
        ):
            said = refused(conn, UPDATE.format(change), case.id)
            assert words in said, (change, said)
        said = refused(conn, UPDATE.format("backup_id = %s"), support.pk, case.id)
        assert "the backup named" in said and "may not act for the operators on call rota" in said, said
        said = refused(conn, UPDATE.format("backup_id = %s"), submitter.pk, case.id)
        assert "its submitter never holds the case, as person or backup" in said, said
        said = refused(conn, UPDATE.format("assigned_for = 'approved:system'"), case.id)
        assert "people are named only for the state the case is in" in said, said
    assert fresh(case).assignee_id == case.assignee_id and fresh(case).backup_id == case.backup_id


def test_the_database_refuses_the_submitter_on_a_case_held_for_the_approvers(support) -> None:
    req = deletion_submit(target="demo:held-for-approvers", actor=named("operator-a"))
    case = fresh(req)
    assert case.assigned_for == "submitted:approvers" and "operator-a" not in (
        case.assignee.username,
        case.backup.username,
    )
    with as_role() as conn:
        said = refused(conn, UPDATE.format("assignee_id = %s"), case.requested_by_user_id, case.id)
        assert "its submitter never holds the case" in said, said
        said = refused(conn, UPDATE.format("backup_id = %s"), support.pk, case.id)
        assert "may not act for the approvers rota" in said and "deletions.approve_deletionrequest" in said, said


def test_a_case_whose_approval_was_revoked_is_named_to_the_approvers_never_its_submitter(cmd) -> None:
    case = needs_attention(cmd)
    deletion_revoke_approval(actor=named("operator-b"), request_id=case.id, reason="withdrawn")
    held = fresh(case)
    assert held.owner == "approvers" and held.assigned_for == "needs_attention:approvers"
    assert "operator-a" not in (held.assignee.username, held.backup.username)


def test_the_services_refuse_custody_moves_the_case_rules_would_refuse_in_one_line(cmd, support) -> None:
    case = needs_attention(cmd)
    person = case.assignee.username
    for how, who, actor, words in (
        ("hand over", "operator-a", person, "four eyes: operator-a submitted this request"),
        ("assign", "operator-a", "operator-b", "four eyes: operator-a submitted this request"),
        ("take", "", "operator-a", "four eyes: operator-a submitted this request"),
        ("hand over", "support-9", person, "support-9 is not on the operators on call rota"),
    ):
        with pytest.raises(Refused, match=words) as no:
            deletion_custody(actor=named(actor), request_id=case.id, how=how, person=who, reason="covering")
        one_line(no.value.message)
    assert (fresh(case).assignee_id, fresh(case).backup_id) == (case.assignee_id, case.backup_id)


def test_a_rota_with_nobody_else_names_nobody_rather_than_a_person_without_a_backup(settings) -> None:
    settings.CUSTODY_ROTAS = {**settings.CUSTODY_ROTAS, "approvers": {"people": ["operator-a", "operator-b"]}}
    req = deletion_submit(target="demo:short-rota", actor=named("operator-a"))  # only operator-b may approve it
    case = fresh(req)
    assert case.assignee_id is None and case.backup_id is None and case.assigned_for == ""
    assert deletion_name_by_rota() == 0
    with pytest.raises(Refused, match="nobody else on the approvers rota may back up operator-b") as no:
        deletion_custody(actor=named("operator-b"), request_id=req.id, how="take", reason="mine")
    one_line(no.value.message)


def test_a_held_retirement_has_an_owner_and_a_backup_who_may_act(cmd, support) -> None:
    assert cmd("create_workspace", "--slug", "held-ws", "--name", "Held", "--disabled").code == 0
    ran = cmd("request_retirement", "--workspace", "held-ws", "--requested-by", "operator-a", "--reason", "closed",
              "--confirm", "held-ws")  # fmt: skip
    assert ran.code == 0, ran.err
    req = RetirementRequest.objects.get(workspace__slug="held-ws")
    retirement_hold(actor=Actor.of(User.objects.get(username="operator-b")), request_id=req.id, reason="legal")
    held: Any = RetirementRequest.objects.get(id=req.id)
    assert held.owner.username == "operator-b" and held.backup_id not in (None, held.owner_id) and held.held_at
    with as_role() as conn:
        for change, words in (
            ("backup_id = NULL", "retirement_held_case_has_a_backup_and_a_review"),
            ("owner_id = NULL", "retirement_open_case_has_an_owner"),
            ("held_at = NULL", "retirement_held_case_has_a_backup_and_a_review"),
        ):
            said = refused(conn, RETIRE.format(change), req.id)
            assert words in said, (change, said)
        said = refused(conn, RETIRE.format("backup_id = %s"), support.pk, req.id)
        assert "may not act for the operators on call rota" in said, said
    with pytest.raises(Refused, match="support-9 is not on the operators on call rota") as no:
        retirement_custody(
            actor=named("operator-b"), request_id=req.id, how="hand over", person="support-9", reason="x"
        )
    one_line(no.value.message)
