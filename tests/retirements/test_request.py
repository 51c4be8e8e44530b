"""Hop 1: a request commits everything together; every refusal commits nothing."""

from __future__ import annotations

import json

import pytest
from django_q.models import OrmQ

from retirements.models import NoticeSlot, RetirementRequest, RetirementWatcher, Workspace
from tests.retirements.conftest import make_staff, retirement_rows

pytestmark = pytest.mark.django_db(transaction=True)


def request_args(
    slug: str = "acme-old", user: str = "hq-alice", reason: str = "contract ended", confirm: str | None = None
):
    return (
        "request_retirement",
        "--workspace",
        slug,
        "--requested-by",
        user,
        "--reason",
        reason,
        "--confirm",
        confirm if confirm is not None else slug,
    )


def test_request_commits_request_slots_watcher_and_pending_lifecycle(cmd, hq, make_workspace) -> None:
    make_workspace()
    ran = cmd(*request_args())
    assert ran.code == 0, ran.err
    out = json.loads(ran.out)
    assert out["status"] == "waiting" and out["eligibility_policy"] == "standard_30_days"
    assert [n["kind"] for n in out["notices"]] == ["request_received", "reminder_7_days", "final_warning"]
    request = RetirementRequest.objects.get(id=out["id"])
    assert Workspace.objects.get(slug="acme-old").lifecycle == "deletion_pending"
    assert NoticeSlot.objects.filter(request=request).count() == 3
    watcher = RetirementWatcher.objects.get(request=request)
    assert request.watcher_id == watcher.id and watcher.status == "pending"
    assert list(request.decisions.values_list("actor_label", "action", "reason")) == [
        ("hq-alice", "request", "contract ended")
    ]
    # The watcher was started after commit (a django-q2 task on the ORM broker).
    assert OrmQ.objects.count() == 1


@pytest.mark.parametrize(
    ("setup", "args", "code", "message"),
    [
        ({}, request_args(slug="nope", confirm="nope"), 2, "no workspace with slug 'nope'"),
        ({}, request_args(user="ghost"), 1, "--requested-by 'ghost': no such user"),
        ({}, request_args(user="hq-nobody"), 1, "(only active staff holding retirements.request_retirement)"),
        ({}, request_args(reason="  "), 2, "a reason is required"),
        ({}, request_args(confirm="acme-olde"), 1, "confirmation does not match slug: typed 'acme-olde'"),
        ({"lifecycle": "active"}, request_args(), 1, "workspace acme-old is active; only a disabled workspace"),
        ({"legal_hold": True}, request_args(), 1, "workspace acme-old has a legal hold"),
        ({"protected_reason": "key account"}, request_args(), 1, "workspace acme-old is protected: key account"),
    ],
)
def test_refusals_commit_nothing(cmd, hq, make_workspace, setup, args, code, message) -> None:
    make_staff("hq-nobody")
    make_workspace(**setup)
    before = retirement_rows()
    ran = cmd(*args)
    assert ran.code == code, ran.err
    assert message in ran.err
    assert retirement_rows() == before
    assert OrmQ.objects.count() == 0


def test_second_open_request_is_refused(cmd, hq, make_workspace) -> None:
    make_workspace()
    first = json.loads(cmd(*request_args()).out)
    before = retirement_rows()
    ran = cmd(*request_args())
    assert ran.code == 1 and f"an open request exists for acme-old: {first['id']} (waiting)" in ran.err
    assert retirement_rows() == before


def test_disposable_workspace_is_refused_in_production(cmd, hq, make_workspace, settings) -> None:
    settings.PRODUCTION = True
    make_workspace(is_disposable_test=True)
    before = retirement_rows()
    ran = cmd(*request_args())
    assert ran.code == 1 and "disposable test workspaces cannot be retired" in ran.err
    assert retirement_rows() == before


def test_inactive_or_non_staff_user_is_refused(cmd, hq, make_workspace) -> None:
    make_workspace()
    hq.is_staff = False
    hq.save()
    ran = cmd(*request_args())
    assert ran.code == 1 and "(only active staff holding retirements.request_retirement)" in ran.err


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        ("hold_retirement", ["--by", "hq-alice", "--reason", "r"]),
        ("release_retirement", ["--by", "hq-alice", "--reason", "r"]),
        ("cancel_retirement", ["--by", "hq-alice", "--reason", "r"]),
        ("resume_retirement", ["--by", "hq-alice", "--reason", "r"]),
        ("show_retirement", []),
    ],
)
def test_unknown_request_ids_exit_2(cmd, hq, command, extra) -> None:
    ran = cmd(command, "00000000-0000-0000-0000-000000000001", *extra)
    assert ran.code == 2 and "no retirement request with id 00000000-0000-0000-0000-000000000001" in ran.err
    ran = cmd(command, "nope", *extra)
    assert ran.code == 2 and "request id 'nope' is not a UUID" in ran.err


def test_create_workspace_refuses_bad_slugs_and_duplicates(cmd, db) -> None:
    assert cmd("create_workspace", "--slug", "Not A Slug", "--name", "x").code == 2
    assert cmd("create_workspace", "--slug", "ok-slug", "--name", "Ok", "--disabled").code == 0
    dup = cmd("create_workspace", "--slug", "ok-slug", "--name", "Ok")
    assert dup.code == 1 and "a workspace with slug 'ok-slug' exists" in dup.err
    assert Workspace.objects.get(slug="ok-slug").lifecycle == "disabled"
