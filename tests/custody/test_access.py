"""Who sees what of a case record: one table (`core.access`), enforced by the admin, the
commands and the exports; support sees targets masked and a reveal is recorded."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from core import access
from core.authority import named
from deletions.services import deletion_submit

TABLE = {
    #            support operator approver auditor superuser
    "targets": (False, True, True, True, True),
    "inventory": (True, True, True, True, True),
    "evidence": (False, True, True, True, True),
    "reasons": (True, True, True, True, True),
    "proof": (False, False, True, True, True),
}


@pytest.mark.parametrize("what", list(TABLE))
def test_the_access_table(what) -> None:
    assert tuple(access.sees({role}, what) for role in access.ROLES) == TABLE[what]
    assert access.sees(set(), what) is False  # no role: nothing


def test_masking_keeps_the_system_and_the_ends_only() -> None:
    assert access.mask("demo:wolfgang42") == "demo:wo…42"
    assert access.mask("manual:crm/ab1234") == "manual:cr…34"
    assert access.mask("demo:bob") == "demo:…"


def user(name: str, group: str) -> User:
    u = User.objects.create_user(name, is_staff=True)
    u.groups.add(Group.objects.get(name=group))
    return u


@pytest.mark.django_db
def test_roles_come_from_the_staff_groups() -> None:
    assert access.roles_of(user("s-1", "support (read-only)")) == {"support"}
    assert access.roles_of(user("a-1", "auditors")) == {"auditor"}
    assert access.roles_of(User.objects.create_superuser("root-9", "r@hq.example", "pw")) == set(access.ROLES)
    assert access.roles_of(User.objects.create_user("outsider", is_staff=False)) == frozenset()


@pytest.mark.django_db
def test_support_sees_the_target_masked_and_a_reveal_is_recorded(client) -> None:
    req = deletion_submit(target="demo:wolfgang42", actor=named("operator-a"), reason="ticket 881")
    client.force_login(user("support-2", "support (read-only)"))
    page = client.get(reverse("admin:deletions_deletionrequest_change", args=[req.id])).content.decode()
    assert "demo:wo…42" in page and "demo:wolfgang42" not in page
    listing = client.get(reverse("admin:deletions_deletionrequest_changelist")).content.decode()
    assert "demo:wo…42" in listing and "demo:wolfgang42" not in listing
    reveal = reverse("admin:deletions_deletionrequest_reveal", args=[req.id])
    refused = client.post(reveal, {"reason": ""}, follow=True)
    assert "demo:wolfgang42" not in refused.content.decode() and not req.decisions.filter(action="reveal").exists()
    shown = client.post(reveal, {"reason": "the customer called about ticket 881"}, follow=True)
    messages = [str(m) for m in shown.context["messages"]]
    assert "The full target is demo:wolfgang42; your reveal is recorded on the case." in messages
    log = req.decisions.get(action="reveal")
    assert (log.actor_label, log.reason) == ("support-2", "the customer called about ticket 881")
    # Others see it in full and are offered no reveal.
    client.force_login(User.objects.get(username="operator-b"))
    page = client.get(reverse("admin:deletions_deletionrequest_change", args=[req.id])).content.decode()
    assert "demo:wolfgang42" in page and "you see the full target already" in page


@pytest.mark.django_db
def test_the_command_line_masks_for_a_reader_who_sees_targets_masked(cmd) -> None:
    req = deletion_submit(target="demo:wolfgang42", actor=named("operator-a"))
    user("support-3", "support (read-only)")
    masked = cmd("show_deletion", str(req.id), "--by", "support-3")
    assert masked.code == 0 and "demo:wo…42" in masked.out and "demo:wolfgang42" not in masked.out
    full = cmd("show_deletion", str(req.id), "--by", "operator-b")
    assert "demo:wolfgang42" in full.out
