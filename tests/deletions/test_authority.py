"""Authority is checked where the effect lands: people, exact approvals, a receiver that checks them."""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import Group, User
from django.db import DatabaseError, IntegrityError, connection, transaction

from deletions.models import DeletionDecision, DeletionRequest, StageHistory
from tests.deletions.helpers import all_rows, effects

pytestmark = pytest.mark.django_db(transaction=True)


def submitted(cmd, target: str = "demo:bob", by: str = "operator-a") -> dict:
    ran = cmd("submit_deletion", "--target", target, "--requested-by", by)
    assert ran.code == 0, ran.err
    return json.loads(ran.out)


def approve(cmd, req: dict, by: str) -> None:
    ran = cmd("approve_deletion", req["id"], "--approved-by", by, "--inventory-digest", req["inventory_digest"])
    assert ran.code == 0, ran.err


def case(req: dict) -> DeletionRequest:
    return DeletionRequest.objects.get(id=req["id"])


def distinct_effects(request_id) -> int:
    return len({op for op, _, _ in effects(request_id)})


@pytest.mark.parametrize(
    ("setup", "by", "message"),
    [
        (None, "no-such-user", "--approved-by 'no-such-user': no such user"),
        ("inactive", "operator-c", "belongs to an inactive user"),
        ("support", "support-7", "(only active staff holding deletions.approve_deletionrequest)"),
        (None, "Operator-A", "four eyes: operator-a submitted request"),
        (None, "operator-a", "four eyes: operator-a submitted request"),
    ],
    ids=["unknown", "inactive", "read-only", "submitter-other-case", "submitter"],
)
def test_command_line_actors_are_people_with_the_permission(cmd, setup, by: str, message: str) -> None:
    req = submitted(cmd)
    if setup == "inactive":
        User.objects.filter(username="operator-c").update(is_active=False)
    if setup == "support":
        User.objects.create_user("support-7", is_staff=True).groups.add(Group.objects.get(name="support (read-only)"))
    before = all_rows()
    ran = cmd("approve_deletion", req["id"], "--approved-by", by, "--inventory-digest", req["inventory_digest"])
    assert ran.code == 1, (ran.code, ran.err)
    assert message in ran.err and len(ran.err.strip().splitlines()) == 1, ran.err
    assert all_rows() == before


def test_submitting_needs_the_submit_permission(cmd) -> None:
    User.objects.create_user("support-7", is_staff=True).groups.add(Group.objects.get(name="support (read-only)"))
    before = all_rows()
    ran = cmd("submit_deletion", "--target", "demo:bob", "--requested-by", "support-7")
    assert ran.code == 1 and "(only active staff holding deletions.submit_deletionrequest)" in ran.err
    assert "support-7 is not allowed to submit deletion requests (only active staff holding" in ran.err  # in words
    assert all_rows() == before


def test_actors_are_linked_users_beside_the_seed_text_columns(cmd) -> None:
    req = submitted(cmd)
    approve(cmd, req, "operator-b")
    saved = case(req)
    approval = saved.approvals.get()
    assert saved.requested_by_user is not None and approval.approved_by_user is not None
    assert (saved.requested_by, saved.requested_by_user.username) == ("operator-a", "operator-a")
    assert (approval.approved_by, approval.approved_by_user.username) == ("operator-b", "operator-b")
    assert (approval.inventory_version, approval.rules_version) == (1, 1)


def refused_then_resumed(cmd, req: dict, rule: str) -> DeletionRequest:
    """The next stage is refused at the boundary: nothing applied, back in review with owner and question."""
    ran = cmd("run_deletion", req["id"])
    assert ran.code == 1 and "back in review, nothing applied" in ran.err and rule in ran.err, ran.err
    saved = case(req)
    assert saved.status == "needs_review" and saved.owner == "approvers" and saved.next_check_at is not None
    assert rule in saved.open_question
    gate, refused = StageHistory.objects.filter(request_id=req["id"]).order_by("created_at")
    assert (gate.status, refused.stage, refused.status, refused.submitted_at) == (
        "completed",
        "purge_db",
        "pending",
        None,
    )
    assert saved.retry_count == 0  # a refusal is not a failure
    log = DeletionDecision.objects.get(request_id=req["id"], action="boundary_refused")
    assert rule in log.reason and log.approval_id == saved.approvals.get().id and log.generation == 2
    return saved


def test_approver_removed_between_stages_stops_the_next_stage_until_a_new_approval(cmd, observe) -> None:
    req = submitted(cmd)
    approve(cmd, req, "operator-b")
    assert cmd("run_deletion", req["id"], "--next-step").code == 0  # gate_user applied
    User.objects.get(username="operator-b").groups.remove(Group.objects.get(name="approvers"))
    refused_then_resumed(cmd, req, "approver operator-b is no longer active staff holding")
    assert distinct_effects(req["id"]) == 1
    approve(cmd, req, "operator-c")
    ran = cmd("run_deletion", req["id"])
    assert ran.code == 0, ran.err
    assert case(req).status == "completed"
    assert len(effects(req["id"])) == distinct_effects(req["id"]) == 6  # each stage applied exactly once
    observe(
        f"approver removed: next stage refused at the receiver (effects 1 -> 1), needs_review owned by approvers; "
        f"re-approved by operator-c, completed with {len(effects(req['id']))} effects, each once"
    )


def test_requester_deactivated_mid_run_stops_the_next_stage(cmd) -> None:
    req = submitted(cmd)
    approve(cmd, req, "operator-b")
    assert cmd("run_deletion", req["id"], "--next-step").code == 0
    User.objects.filter(username="operator-a").update(is_active=False)
    refused_then_resumed(cmd, req, "requester operator-a is no longer active staff")
    assert distinct_effects(req["id"]) == 1
    User.objects.filter(username="operator-a").update(is_active=True)  # authority restored, then re-approved
    approve(cmd, req, "operator-c")
    assert cmd("run_deletion", req["id"]).code == 0
    assert case(req).status == "completed" and len(effects(req["id"])) == 6


def test_approval_expiring_after_the_first_stage_blocks_new_effects(cmd, observe) -> None:
    req = submitted(cmd)
    approve(cmd, req, "operator-b")
    assert cmd("run_deletion", req["id"], "--next-step").code == 0
    expires_at = case(req).approvals.get().expires_at
    assert expires_at is not None
    expired = expires_at + timedelta(minutes=1)
    with time_machine.travel(expired, tick=False):
        saved = refused_then_resumed(cmd, req, "approval expired at")
        assert distinct_effects(req["id"]) == 1
        approve(cmd, req, "operator-c")  # a fresh approval of the same digest
        assert cmd("run_deletion", req["id"]).code == 0
    assert case(req).status == "completed" and len(effects(req["id"])) == 6
    observe(
        f"approval expired after gate_user: purge_db refused at the receiver ({saved.open_question[:40]}...), "
        f"no new effect; fresh approval resumed, {len(effects(req['id']))} effects in all, none repeated"
    )


def test_the_approved_proposal_cannot_change_in_the_database(cmd) -> None:
    req = submitted(cmd)
    approve(cmd, req, "operator-b")
    for sql in (
        "UPDATE entity_deletion_requests SET inventory_json = '{\"communities\": []}' WHERE id = %s",
        "UPDATE entity_deletion_requests SET inventory_digest = repeat('0', 64) WHERE id = %s",
        "UPDATE entity_deletion_requests SET inventory_version = 2 WHERE id = %s",
    ):
        with pytest.raises(DatabaseError, match="Cannot update"), transaction.atomic(), connection.cursor() as cur:
            cur.execute(sql, [req["id"]])
    assert case(req).inventory_digest == req["inventory_digest"]


def test_an_inventory_changed_behind_the_trigger_is_refused_at_the_next_effect(cmd) -> None:
    """Each run digests the inventory its claim read, and every grant compares that digest with the
    saved one: the next run reads the changed inventory, and its first effect is refused."""
    req = submitted(cmd)
    approve(cmd, req, "operator-b")
    ran = cmd("run_deletion", req["id"], "--next-step")  # gate_user: this process digests the inventory
    assert ran.code == 0, ran.err
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SET LOCAL session_replication_role = replica")  # as a restore with triggers off would
        cur.execute(
            "UPDATE entity_deletion_requests SET inventory_json = jsonb_set(inventory_json, '{communities,0,role}',"
            " '\"former_participant\"') WHERE id = %s",
            [req["id"]],
        )
    ran = cmd("run_deletion", req["id"])
    assert ran.code == 1 and "the inventory this run read" in ran.err and "does not match" in ran.err, ran.err
    assert distinct_effects(req["id"]) == 1  # the gate only: nothing applied under the changed inventory
    assert case(req).status == "needs_review"


def test_an_edited_approval_is_refused_at_the_boundary(cmd) -> None:
    """PostgreSQL refuses an edited approval; edited anyway with the guards off (as a restore of a
    tampered backup would), the receiver still refuses it."""
    req = submitted(cmd)
    approve(cmd, req, "operator-b")
    edit = "UPDATE entity_deletion_approvals SET inventory_digest = repeat('f', 64) WHERE request_id = %s"
    with (
        pytest.raises(IntegrityError, match="evidence rows are never rewritten"),
        transaction.atomic(),
        connection.cursor() as cur,
    ):
        cur.execute(edit, [req["id"]])
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SET LOCAL session_replication_role = replica")
        cur.execute(edit, [req["id"]])
    ran = cmd("run_deletion", req["id"])
    assert ran.code == 1 and "approval covers digest ffff" in ran.err, ran.err
    assert effects(req["id"]) == []


def test_decision_logs_are_append_only_in_the_database(cmd) -> None:
    req = submitted(cmd)
    for sql in (
        "UPDATE entity_deletion_decisions SET reason = 'rewritten' WHERE request_id = %s",
        "DELETE FROM entity_deletion_decisions WHERE request_id = %s",
    ):
        with (
            pytest.raises(DatabaseError, match="evidence rows are never rewritten or deleted"),
            transaction.atomic(),
            connection.cursor() as cur,
        ):
            cur.execute(sql, [req["id"]])
    assert DeletionDecision.objects.get(request_id=req["id"], action="submit").reason == ""


def test_investigating_an_unknown_effect_is_still_allowed_after_the_approval_expired(cmd, observe) -> None:
    """Block any new application under the old approval; only the permitted investigation continues."""
    from tests.deletions.helpers import crash_at

    req = submitted(cmd)
    approve(cmd, req, "operator-b")
    crashed = crash_at("after-effect", req["id"])  # gate_user applied, its outcome never saved
    assert len(effects(req["id"])) == 1
    expires_at = crashed.approvals.get().expires_at
    assert expires_at is not None and crashed.lease_expires_at is not None
    with time_machine.travel(max(expires_at, crashed.lease_expires_at) + timedelta(minutes=1), tick=False):
        ran = cmd("run_deletion", req["id"], "--executor-id", "worker-b")
    assert ran.code == 1 and "approval expired" in ran.err, ran.err
    gate = StageHistory.objects.get(request_id=req["id"], stage="gate_user")
    assert gate.status == "completed" and gate.metadata_json["result"]["gated"] is True
    assert len(effects(req["id"])) == 1  # looked up and saved, nothing new applied
    assert case(req).status == "needs_review"
    status = case(req).status
    observe(
        f"approval expired at {expires_at:%H:%M:%S} with gate_user's effect unknown: worker-b exit {ran.code}, gate "
        f"{gate.status} from the target's record {gate.metadata_json['result']}, effects at the receiver "
        f"{len(effects(req['id']))}, request {status}"
    )


def test_worker_stopped_while_the_approval_is_withdrawn_finds_the_same_proposal_and_its_state(cmd, observe) -> None:
    from tests.deletions.helpers import crash_at, take_over

    req = submitted(cmd)
    approve(cmd, req, "operator-b")
    crashed = crash_at("after-transition", req["id"])  # gate_user saved with its successor, not yet run
    revoked = cmd("revoke_approval", req["id"], "--by", "operator-c", "--reason", "customer disputes the inventory")
    assert revoked.code == 0, revoked.err
    ran = take_over(cmd, crashed)
    assert ran.code == 1 and "approval revoked at" in ran.err, ran.err
    shown = json.loads(cmd("show_deletion", req["id"], "--json").out)
    assert shown["request"]["inventory_digest"] == req["inventory_digest"]  # the same proposal
    assert shown["request"]["status"] == "needs_review" and shown["approvals"][0]["revoked_at"]
    assert len(effects(req["id"])) == 1
    approve(cmd, req, "operator-b")  # a new approval of the same digest
    assert cmd("run_deletion", req["id"]).code == 0
    assert case(req).status == "completed" and len(effects(req["id"])) == 6
    observe(
        f"worker killed after gate_user, approval revoked meanwhile: the replacement found digest "
        f"{req['inventory_digest'][:12]}, status {shown['request']['status']}, approval revoked at "
        f"{shown['approvals'][0]['revoked_at'][11:19]}; a new approval resumed, {len(effects(req['id']))} effects"
    )


def test_revoking_an_unstarted_approval_sends_it_back_and_a_second_revoke_is_refused(cmd) -> None:
    req = submitted(cmd)
    approve(cmd, req, "operator-b")
    revoke = ("revoke_approval", req["id"], "--by", "operator-c", "--reason", "wrong customer")
    ran = cmd(*revoke)
    assert ran.code == 0, ran.err
    saved = case(req)
    assert saved.status == "submitted" and saved.owner == "approvers" and "revoked by operator-c" in saved.open_question
    assert saved.approvals.get().revoked_at is not None
    refused = cmd("run_deletion", req["id"])
    assert refused.code == 1 and "is not approved" in refused.err
    before = all_rows()
    again = cmd(*revoke)
    assert again.code == 1 and "has no current approval to revoke" in again.err
    assert all_rows() == before
    no_reason = cmd("revoke_approval", req["id"], "--by", "operator-c", "--reason", " ")
    assert no_reason.code == 2 and "a reason is required to revoke an approval" in no_reason.err


USERS: dict[str, tuple[dict[str, Any], bool]] = {  # kind: (the user, whether it may)
    "plain staff": ({"is_staff": True}, False),
    "direct permission": ({"is_staff": True, "perm": "direct"}, True),
    "group permission": ({"is_staff": True, "perm": "group"}, True),
    "superuser": ({"is_staff": True, "is_superuser": True}, True),
    "inactive with permission": ({"is_staff": True, "is_active": False, "perm": "direct"}, False),
    "not staff, with permission": ({"is_staff": False, "perm": "group"}, False),
    "inactive superuser": ({"is_staff": True, "is_superuser": True, "is_active": False}, False),
}


@pytest.mark.parametrize("kind", list(USERS))
@pytest.mark.parametrize("perm", ["deletions.approve_deletionrequest", "deletions.submit_deletionrequest"])
def test_the_boundarys_sql_permission_check_agrees_with_djangos(kind: str, perm: str) -> None:
    """The receiver reads authority in its locking statement (`may_sql`); it must answer as `may` does."""
    from django.contrib.auth.models import Permission

    from core.authority import may, may_sql

    spec, expected = dict(USERS[kind][0]), USERS[kind][1]
    how = spec.pop("perm", None)
    user = User.objects.create_user(f"u-{len(kind)}-{perm[-20:-15]}", **spec)
    other = Permission.objects.get(codename="cancel_deletionrequest")  # held by all: must not count
    user.user_permissions.add(other)
    granted = Permission.objects.get(codename=perm.split(".")[1])
    if how == "direct":
        user.user_permissions.add(granted)
    elif how == "group":
        group = Group.objects.create(name=f"g-{user.username}")
        group.permissions.add(granted)
        user.groups.add(group)
    sql, params = may_sql("%s", perm)
    with connection.cursor() as cur:
        cur.execute(f"SELECT {sql}", [*params, user.pk])
        answered = cur.fetchone()[0]
        cur.execute(f"SELECT {sql}", [*params, -1])
        nobody = cur.fetchone()[0]
    fresh = User.objects.get(pk=user.pk)
    assert answered is may(fresh, perm) is expected
    assert nobody is False


def _facts(**changed: Any) -> Any:
    """What the boundary reads for an effect every rule allows, with `changed` applied."""
    from datetime import UTC, datetime

    from deletions.contract import AuthorityFacts

    now = datetime(2026, 12, 3, tzinfo=UTC)
    allowed = AuthorityFacts(
        now=now,
        status="running",
        cancel_requested=False,
        stored_digest="d" * 64,
        inventory_version=1,
        rules_version=1,
        approval_id=uuid.UUID(int=1),
        approval_digest="d" * 64,
        approval_inventory_version=1,
        approval_rules_version=1,
        approval_expires_at=now + timedelta(days=1),
        approval_revoked_at=None,
        approver="operator-b",
        approver_may=True,
        requester="operator-a",
        requester_may=True,
        same_person=False,
        community_id="c1",
        approved_version=3,
        run_digest="d" * 64,
        run_communities={"c1": 0},
    )
    return dataclasses.replace(allowed, **changed)


@pytest.mark.parametrize(
    ("changed", "rule"),
    [
        ({}, None),
        ({"run_digest": "e" * 64}, f"the inventory this run read (digest {'e' * 64}) does not match the saved digest"),
        ({"run_digest": ""}, "the inventory this run read (digest none) does not match the saved digest"),
        ({"run_communities": {"c2": 0}}, "community c1 is not in the approved inventory: no effect there"),
        ({"community_id": None, "run_communities": {}}, None),  # the gate: no community to look up
    ],
    ids=["allowed", "another-inventory", "no-digest", "outside-the-plan", "no-community"],
)
def test_the_boundary_rule_compares_the_runs_inventory(changed: dict, rule: str | None) -> None:
    from deletions import authority

    refused = authority.refusal(_facts(**changed))
    assert (refused and refused.rule.startswith(rule) and refused.review) if rule else refused is None, refused
