"""A workspace's legal hold and protection (the destructive boundary's own protections) change
only through their service: a permission, a reason, the workspace lock and a decision row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import Group, Permission
from django.urls import reverse

from core.authority import Actor
from core.errors import DomainError
from ops.groups import ensure_groups
from retirements.models import Decision, PurgeJob, Workspace
from retirements.services import workspace_protect
from tests.retirements.conftest import make_staff, retirement_rows
from tests.retirements.helpers import fresh, request_at, run_at

pytestmark = pytest.mark.django_db

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.fixture
def legal(db):
    ensure_groups(Group, Permission)
    user = make_staff("lee-legal")
    user.groups.add(Group.objects.get(name="legal"))
    return user


def test_a_legal_hold_set_during_the_wait_closes_the_retirement_without_purge(hq, legal, make_workspace) -> None:
    make_workspace()
    req = request_at(T, hq)
    run_at(T)
    with time_machine.travel(T + 10 * DAY, tick=False):
        changed = workspace_protect(
            actor=Actor.of(legal), slug="acme-old", legal_hold=True, protected_reason="", reason="litigation 2026-114"
        )
    assert changed == ["legal_hold_set"]
    decision = Decision.objects.get(action="legal_hold_set")
    assert (decision.actor_label, decision.reason, decision.request_id) == ("lee-legal", "litigation 2026-114", req.id)
    assert fresh(req).last_action == "legal hold set by lee-legal"
    run_at(T + 29 * DAY)  # the final warning, on time
    run_at(T + 30 * DAY)
    after = fresh(req)
    assert after.status == "closed" and "legal hold" in after.conclusion
    assert not PurgeJob.objects.exists() and after.workspace.lifecycle == "disabled"


def test_lifting_and_protecting_are_decisions_too(legal, make_workspace) -> None:
    make_workspace(legal_hold=True)
    changed = workspace_protect(
        actor=Actor.of(legal), slug="acme-old", legal_hold=False, protected_reason="VIP customer", reason="case closed"
    )
    assert changed == ["legal_hold_lifted", "protection_set"]
    ws = Workspace.objects.get(slug="acme-old")
    assert (ws.legal_hold, ws.protected_reason) == (False, "VIP customer")
    assert list(Decision.objects.order_by("id").values_list("action", "reason")) == [
        ("legal_hold_lifted", "case closed"),
        ("protection_set", "case closed (VIP customer)"),
    ]


@pytest.mark.parametrize(
    ("who", "kwargs", "refusal"),
    [
        ("hq", {}, "retirements.protect_workspace"),
        ("legal", {"reason": ""}, "reason"),
        ("legal", {"legal_hold": False}, "already has these protections; nothing changed"),
        ("legal", {"protected_reason": "x\x1b[31m"}, "printable"),
        ("legal", {"slug": "no-such"}, "no workspace with slug"),
    ],
)
def test_refusals_write_nothing(hq, legal, make_workspace, who, kwargs, refusal) -> None:
    make_workspace()
    before = retirement_rows()
    args: dict[str, Any] = {"slug": "acme-old", "legal_hold": True, "protected_reason": "", "reason": "because"}
    if kwargs.get("legal_hold") is False:
        args["legal_hold"] = False
    args.update({k: v for k, v in kwargs.items() if k != "legal_hold"})
    actor = Actor.of(hq if who == "hq" else legal)
    with pytest.raises(DomainError) as exc:
        workspace_protect(actor=actor, **args)
    assert refusal in exc.value.message
    assert retirement_rows() == before


def test_nothing_changes_once_the_workspace_is_being_deleted(legal, make_workspace) -> None:
    make_workspace(lifecycle="deleting")
    with pytest.raises(DomainError, match="past the point of no return: workspace acme-old is deleting"):
        workspace_protect(actor=Actor.of(legal), slug="acme-old", legal_hold=True, protected_reason="", reason="late")
    assert not Workspace.objects.get(slug="acme-old").legal_hold


def test_the_workspace_form_cannot_flip_a_protection(client, legal, make_workspace) -> None:
    ws = make_workspace()
    admin = make_staff("root-admin")
    admin.is_superuser = True
    admin.save()
    client.force_login(admin)
    change = reverse("admin:retirements_workspace_change", args=[ws.pk])
    page = client.get(change).content.decode()
    assert 'name="legal_hold"' not in page and "set or lift the legal hold or protection" in page
    client.post(change, {"name": "Acme Old", "legal_hold": "on", "protected_reason": "sneaky"})
    after = Workspace.objects.get(pk=ws.pk)
    assert (after.name, after.legal_hold, after.protected_reason) == ("Acme Old", False, "")
    assert not Decision.objects.exists()
    protect = reverse("admin:retirements_workspace_protect", args=[ws.pk])
    client.force_login(legal)
    done = client.post(protect, {"legal_hold": "on", "protected_reason": "", "reason": "litigation"})
    assert done.status_code == 302, done.content.decode()[:500]
    assert Workspace.objects.get(pk=ws.pk).legal_hold
    assert Decision.objects.get().actor_label == "lee-legal"


def test_the_commands_create_under_a_hold_and_change_it_with_a_reason(cmd, legal) -> None:
    made = cmd("create_workspace", "--slug", "held-ws", "--name", "Held", "--disabled", "--legal-hold")
    assert made.code == 0, made.err
    assert Decision.objects.get(workspace__slug="held-ws").action == "legal_hold_set"
    refused = cmd("protect_workspace", "held-ws", "--by", "lee-legal", "--reason", "x")
    assert refused.code == 2 and "say what changes" in refused.err
    lifted = cmd("protect_workspace", "held-ws", "--by", "lee-legal", "--lift-legal-hold", "--reason", "settled")
    assert lifted.code == 0, lifted.err
    assert '"legal_hold": false' in lifted.out and "legal_hold_lifted" in lifted.out
    assert not Workspace.objects.get(slug="held-ws").legal_hold
    protected = cmd("protect_workspace", "held-ws", "--by", "lee-legal", "--protected-reason", "VIP", "--reason", "x")
    assert protected.code == 0, protected.err
    after = Workspace.objects.get(slug="held-ws")
    assert (after.legal_hold, after.protected_reason) == (False, "VIP")  # the hold kept as the locked row had it
