"""Waiting for me: each user sees the cases they hold, those they back up, and those waiting on
their rota with nobody named yet, soonest due first; the list filter says the same."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from core.authority import named
from deletions.models import DeletionRequest, Status
from deletions.services import deletion_approve, deletion_custody, deletion_name_by_rota, deletion_submit
from retirements.models import RetirementRequest
from tests.support import force

pytestmark = pytest.mark.django_db


def fresh(case_id: Any) -> Any:
    return DeletionRequest.objects.select_related("assignee", "backup").get(id=case_id)


def inbox(client, who: str) -> str:
    client.force_login(User.objects.get(username=who))
    page = client.get(reverse("inbox"))
    assert page.status_code == 200
    return page.content.decode()


def test_the_inbox_of_three_users(client) -> None:
    lead = User.objects.create_user("lead-1", is_staff=True)
    lead.groups.add(Group.objects.get(name="support (read-only)"))
    approval = deletion_submit(target="demo:waits-approval", actor=named("operator-a"))  # the rota names b, c
    attention = deletion_submit(target="demo:needs-hands", actor=named("operator-a"))
    deletion_approve(request_id=attention.id, actor=named("operator-b"), digest=attention.inventory_digest)
    force(DeletionRequest.objects.filter(id=attention.id), status=Status.NEEDS_ATTENTION, owner="operators on call",
          open_question="failed 10 times")  # fmt: skip
    deletion_name_by_rota()
    deletion_custody(
        actor=named("operator-b"), request_id=attention.id, how="assign", person="operator-c", reason="her system"
    )
    attention = fresh(attention.id)
    approval = fresh(approval.id)
    assert (approval.assignee.username, approval.backup.username) == ("operator-b", "operator-c")
    assert attention.assignee.username == "operator-c" and attention.backup.username != "operator-c"
    # operator-c holds the case needing attention and backs up the approval.
    c = inbox(client, "operator-c")
    assert "needs-hands" in c and "waits-approval" in c and "you hold it" in c and "you are its backup" in c
    assert c.index("needs-hands") < c.index("waits-approval")  # due now, before the approval's next check
    # operator-a submitted the approval (never hers) and backs up the other case or not.
    a = inbox(client, "operator-a")
    assert "waits-approval" not in a
    assert ("needs-hands" in a) is (attention.backup.username == "operator-a")
    # Support is on no rota and holds nothing, and is told why.
    lead_page = inbox(client, "lead-1")
    assert "Nothing waits for you." in lead_page
    assert "You are on no rota (approvers, operators on call): a case reaches you here only when" in lead_page
    rotas = c.split('id="rotas">')[1].split("</p>")[0]
    assert rotas.startswith("You are on the rota") and "operators on call" in rotas, rotas
    # The list's saved view "waiting for me" is the same set.
    client.force_login(User.objects.get(username="operator-c"))
    mine = client.get(reverse("admin:deletions_deletionrequest_changelist"), {"view": "mine"}).content.decode()
    assert "needs-hands" in mine and "waits-approval" in mine


def test_a_case_waiting_on_a_rota_before_anyone_is_named_is_in_every_members_inbox(client) -> None:
    req = deletion_submit(target="demo:unnamed", actor=named("operator-a"))
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    force(DeletionRequest.objects.filter(id=req.id), status=Status.NEEDS_ATTENTION, owner="operators on call",
          open_question="failed 10 times")  # fmt: skip
    for who in ("operator-b", "operator-c"):
        page = inbox(client, who)
        assert "unnamed" in page and "your rota: nobody named yet" in page, who
    assert "unnamed" not in inbox(client, "operator-a")  # on the rota, but the submitter: never theirs to act on
    deletion_name_by_rota()
    holders = [who for who in ("operator-a", "operator-b", "operator-c") if "unnamed" in inbox(client, who)]
    assert len(holders) == 2  # the person and the backup, no longer the whole rota


def test_the_retirement_list_has_waiting_for_me_too(client, cmd) -> None:
    assert cmd("create_workspace", "--slug", "mine-ws", "--name", "M", "--disabled").code == 0
    assert cmd("create_workspace", "--slug", "theirs-ws", "--name", "T", "--disabled").code == 0
    for slug, who in (("mine-ws", "operator-a"), ("theirs-ws", "operator-b")):
        ran = cmd("request_retirement", "--workspace", slug, "--requested-by", who, "--reason", "closed",
                  "--confirm", slug)  # fmt: skip
        assert ran.code == 0, ran.err
    client.force_login(User.objects.get(username="operator-a"))
    page = client.get(reverse("admin:retirements_retirementrequest_changelist"), {"view": "mine"}).content.decode()
    assert "mine-ws" in page
    theirs = RetirementRequest.objects.select_related("backup").get(workspace__slug="theirs-ws")
    assert ("theirs-ws" in page) is (theirs.backup is not None and theirs.backup.username == "operator-a")
    # In its waiting period a retirement asks nothing of anyone: held, it asks its owner to decide.
    assert "mine-ws" not in inbox(client, "operator-a")
    mine = RetirementRequest.objects.get(workspace__slug="mine-ws")
    from core.authority import Actor
    from retirements.services import retirement_hold

    retirement_hold(actor=Actor.of(User.objects.get(username="operator-a")), request_id=mine.id, reason="asked")
    assert "mine-ws" in inbox(client, "operator-a")


@pytest.mark.django_db(transaction=True)
def test_an_unknown_effect_waits_on_the_operators_on_call_never_on_the_approvers(client, settings) -> None:
    """A real worker SIGKILLed right after it submitted: once it missed three heartbeats, and after its
    lease lapsed, the case is in the inbox of the operators on call (nobody named yet) in the page's
    words, and not in that of the approver named for its approval before."""
    from datetime import timedelta

    import time_machine

    from core import present
    from tests.deletions.helpers import crash_at

    settings.DELETION_HEARTBEAT_SECONDS = 10
    approver = User.objects.create_user("approver-8", is_staff=True)  # approvers only: named for the approval
    approver.groups.add(Group.objects.get(name="approvers"))
    on_call = User.objects.create_user("oncall-9", is_staff=True)  # operators only
    on_call.groups.add(Group.objects.get(name="operators"))
    req = deletion_submit(target="demo:lost-worker", actor=named("operator-a"))
    deletion_name_by_rota()
    assert fresh(req.id).assignee.username == "approver-8"
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    crashed = crash_at("after-submit-mark", req.id)
    assert crashed.heartbeat_at is not None and crashed.lease_expires_at is not None
    for moment in (crashed.heartbeat_at + timedelta(seconds=40), crashed.lease_expires_at + timedelta(seconds=1)):
        with time_machine.travel(moment, tick=False):
            assert "lost-worker" not in inbox(client, "approver-8")
            assert "lost-worker" not in inbox(client, "operator-a")  # on the rota, but its submitter
            page = inbox(client, "oncall-9")
            row = page.split("lost-worker")[1].split("</tr>")[0]
            assert "your rota: nobody named yet" in row and ">effect unknown<" in row, row
            assert "queued" not in row and f"not reporting since {present.absolute(crashed.heartbeat_at)}" in row
            assert "operators on call (group): nobody named yet" in row
