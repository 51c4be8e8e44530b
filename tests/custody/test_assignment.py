"""Custody: a named person and backup on every open case, from the rota per state, and by hand
(take, assign, hand over: each a decision with a reason and a permission)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from core import custody as rota_rules
from core.authority import named
from core.errors import BadInput, Refused
from deletions import case
from deletions.models import DeletionRequest, Status
from deletions.services import (
    deletion_approve,
    deletion_custody,
    deletion_name_by_rota,
    deletion_submit,
)
from retirements.models import RetirementRequest
from retirements.services import retirement_custody, retirement_name_by_rota
from tests.support import force

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LIVE = NOW + timedelta(seconds=40)


def row(status: str, *, lease=None, question: str = "", owner: str = "system") -> SimpleNamespace:
    return SimpleNamespace(
        status=status, lease_owner="q:vm:1" if lease else None, lease_expires_at=lease, heartbeat_at=NOW,
        lease_generation=1, open_question=question, owner=owner, requested_by="operator-a",
        next_attempt_at=None, updated_at=NOW,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("status", "lease", "question", "unsettled", "rota"),
    [
        ("submitted", None, "", False, "approvers"),
        ("needs_review", None, "approval expired", False, "approvers"),
        ("approved", None, "", False, None),  # the dispatcher's
        ("approved", LIVE, "", False, None),  # a worker holds it
        ("running", LIVE, "", False, None),
        ("running", None, "", False, None),  # queued for the next free worker
        ("running", None, "", True, "operators on call"),  # a lost worker's effect is unknown
        ("retry_wait", None, "", False, None),  # a plain retry: the system's
        ("retry_wait", None, "did operation X take effect?", False, "operators on call"),
        ("needs_attention", None, "failed 10 times", False, "operators on call"),
        ("completed", None, "", False, None),
        ("cancelled", None, "", False, None),
    ],
)
def test_the_rota_that_answers_a_deletion_follows_its_state(status, lease, question, unsettled, rota) -> None:
    req = row(status, lease=lease, question=question)
    assert case.rota_for(req, NOW, unsettled) == rota
    assert case.custody_key(req, NOW, unsettled) == f"{status}:{rota or 'system'}"


def test_the_rota_picks_the_least_loaded_then_by_name_and_never_the_barred() -> None:
    members = [rota_rules.Member(1, "cy", 2), rota_rules.Member(2, "al", 1), rota_rules.Member(3, "bo", 1)]
    assert rota_rules.pick(members) == rota_rules.Pick(2, 3)  # al and bo hold one each: by name
    assert rota_rules.pick(members, exclude=[2]) == rota_rules.Pick(3, 1)
    assert rota_rules.pick(members, keep=1) == rota_rules.Pick(1, 2)  # kept by hand; the backup from the rota
    assert rota_rules.pick([rota_rules.Member(1, "cy")], exclude=[1]) == rota_rules.Pick(None, None)


def held(req) -> tuple[Any, Any]:
    """(person, backup) usernames, None where nobody is named."""
    fresh = DeletionRequest.objects.select_related("assignee", "backup").get(id=req.id)
    c = case.custodians(fresh, datetime.now(UTC), False)
    return c.person, c.backup


@pytest.mark.django_db
def test_a_submission_is_named_to_an_approver_and_a_backup_never_the_submitter() -> None:
    reqs = [deletion_submit(target=f"demo:rota-{i}", actor=named("operator-a")) for i in range(3)]
    named_ = [held(r) for r in reqs]
    # operator-b and operator-c are the approvers other than the submitter: one case each, then again.
    assert [p for p, _ in named_] == ["operator-b", "operator-c", "operator-b"]
    assert all(p != b and "operator-a" not in (p, b) for p, b in named_)


@pytest.mark.django_db
def test_the_rota_names_again_when_the_case_moves_and_clears_while_the_system_runs_it(cmd) -> None:
    req = deletion_submit(target="demo:moves", actor=named("operator-a"))
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    assert deletion_name_by_rota() == 1
    assert held(req) == (None, None)
    shown = json.loads(cmd("show_deletion", str(req.id), "--json").out)
    assert shown["responsible"] is None and shown["backup"] is None
    assert shown["responsible_why"] == "system: the next worker (dispatcher)"
    force(DeletionRequest.objects.filter(id=req.id), status=Status.NEEDS_ATTENTION, open_question="failed 10 times")
    assert deletion_name_by_rota() == 1
    person, backup = held(req)
    assert person in {"operator-a", "operator-b", "operator-c"} and backup not in (None, person)
    shown = json.loads(cmd("show_deletion", str(req.id), "--json").out)
    assert (shown["responsible"], shown["backup"]) == (person, backup) and shown["due_at"]
    assert deletion_name_by_rota() == 0  # named for this state: nothing to do


@pytest.mark.django_db
def test_take_assign_and_hand_over_are_decisions_with_a_reason_and_a_permission() -> None:
    req = deletion_submit(target="demo:hands", actor=named("operator-a"))
    person, backup = held(req)
    # Take: for yourself, if you are on the rota; the submitter never holds their own case.
    with pytest.raises(Refused, match="four eyes: operator-a submitted this request, so they never hold it"):
        deletion_custody(actor=named("operator-a"), request_id=req.id, how="take", reason="mine")
    with pytest.raises(BadInput, match="reason"):
        deletion_custody(actor=named(backup), request_id=req.id, how="take", reason="")
    deletion_custody(actor=named(backup), request_id=req.id, how="take", reason="I know this customer")
    assert held(req)[0] == backup
    # Hand over: only the person or the backup; to someone on the rota.
    stranger = User.objects.create_user("support-9", is_staff=True)
    stranger.groups.add(Group.objects.get(name="support (read-only)"))
    with pytest.raises(Refused, match="only the case's person or its backup hands it over"):
        deletion_custody(actor=named("support-9"), request_id=req.id, how="hand over", person=person, reason="x")
    with pytest.raises(Refused, match="support-9 is not on the approvers rota"):
        deletion_custody(actor=named(backup), request_id=req.id, how="hand over", person="support-9", reason="x")
    # Assign: needs the permission to assign.
    with pytest.raises(Refused, match="needs the permission to assign"):
        deletion_custody(actor=named("support-9"), request_id=req.id, how="assign", person=person, reason="x")
    deletion_custody(actor=named(backup), request_id=req.id, how="hand over", person=person, reason="on leave")
    assert held(req)[0] == person
    log = list(req.decisions.filter(action__in=["take", "hand_over"]).values_list("actor_label", "action", "reason"))
    assert [(a, b) for a, b, _ in log] == [(backup, "take"), (backup, "hand_over")]
    assert log[1][2].startswith(f"{person} holds it") and log[1][2].endswith("on leave")


@pytest.mark.django_db
def test_the_backup_has_the_access_the_person_has() -> None:
    """The backup of an approval may approve it and hand it over, as its person may."""
    req = deletion_submit(target="demo:cover", actor=named("operator-a"))
    _, backup = held(req)
    deletion_custody(actor=named(backup), request_id=req.id, how="hand over", person=backup, reason="covering")
    assert held(req)[0] == backup
    deletion_approve(request_id=req.id, actor=named(backup), digest=req.inventory_digest)
    assert DeletionRequest.objects.get(id=req.id).status == Status.APPROVED


@pytest.mark.django_db
def test_an_ended_or_system_run_case_is_held_by_nobody_and_says_why() -> None:
    req = deletion_submit(target="demo:ended", actor=named("operator-a"))
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    with pytest.raises(
        Refused, match=r"system: the next worker \(dispatcher\); nobody is named until it waits on a person"
    ):
        deletion_custody(actor=named("operator-c"), request_id=req.id, how="take", reason="x")


@pytest.mark.django_db
def test_a_retirement_has_its_owner_and_a_backup_and_can_change_hands(cmd) -> None:
    ran = cmd("create_workspace", "--slug", "cust-ws", "--name", "Custody", "--disabled")
    assert ran.code == 0, ran.err
    ran = cmd("request_retirement", "--workspace", "cust-ws", "--requested-by", "operator-a", "--reason", "closed",
              "--confirm", "cust-ws")  # fmt: skip
    assert ran.code == 0, ran.err
    req: Any = RetirementRequest.objects.select_related("owner", "backup").get(workspace__slug="cust-ws")
    assert req.owner.username == "operator-a" and req.backup.username in {"operator-b", "operator-c"}
    shown = json.loads(cmd("show_retirement", str(req.id), "--json").out)
    assert (shown["responsible"], shown["backup"]) == ("operator-a", req.backup.username)
    retirement_custody(actor=named("operator-c"), request_id=req.id, how="take", reason="covering this week")
    again: Any = RetirementRequest.objects.select_related("owner", "backup").get(id=req.id)
    assert again.owner.username == "operator-c" and again.backup.username not in (None, "operator-c")
    with pytest.raises(Refused, match="that person already holds this case"):
        retirement_custody(actor=named("operator-c"), request_id=req.id, how="take", reason="again")
    assert again.decisions.filter(action="take", actor_label="operator-c").exists()
    force(RetirementRequest.objects.filter(id=req.id), backup=None)
    assert retirement_name_by_rota() == 1
    assert RetirementRequest.objects.get(id=req.id).backup_id is not None


@pytest.mark.django_db
def test_hand_case_takes_assigns_and_hands_over_from_the_command_line(cmd) -> None:
    req = deletion_submit(target="demo:by-command", actor=named("operator-a"))
    person, backup = held(req)
    took = cmd("hand_case", str(req.id), "--kind", "deletion", "--take", "--by", backup, "--reason", "mine now")
    assert took.code == 0, took.err
    assert json.loads(took.out)["responsible"] == backup
    both = cmd("hand_case", str(req.id), "--kind", "deletion", "--take", "--assign", person, "--by", backup,
               "--reason", "x")  # fmt: skip
    assert both.code == 2 and "say one of" in both.err
    given = cmd(
        "hand_case", str(req.id), "--kind", "deletion", "--hand-over", person, "--by", backup, "--reason", "back"
    )
    assert given.code == 0 and json.loads(given.out)["responsible"] == person
    nobody = cmd("hand_case", str(req.id), "--kind", "deletion", "--take", "--by", "nobody-9", "--reason", "x")
    assert nobody.code == 1 and "no such user" in nobody.err
