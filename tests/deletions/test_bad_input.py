"""Every refusal: one line naming the rule and values, non-zero exit, nothing written."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from tests.conftest import ROOT, manage_argv, subprocess_env
from tests.deletions.helpers import all_rows

pytestmark = pytest.mark.django_db(transaction=True)


def submitted(cmd, target: str = "demo:bob", by: str = "operator-a") -> dict:
    ran = cmd("submit_deletion", "--target", target, "--requested-by", by)
    assert ran.code == 0, ran.err
    return json.loads(ran.out)


def refused(cmd, code: int, message: str, *args: str) -> None:
    before = all_rows()
    ran = cmd(*args)
    assert ran.code == code, (ran.code, ran.err)
    assert message in ran.err, ran.err
    assert len(ran.err.strip().splitlines()) == 1, ran.err
    assert all_rows() == before


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("bob", "it starts with its system's prefix (like demo: or manual:)"),
        ("demo:", "1-200 characters must follow demo: (got 0)"),
        ("demo:" + "x" * 201, "(got 201)"),
        ("demo:bad\nname", "only printable ASCII characters"),
        ("demo: padded ", "only printable ASCII characters"),
    ],
)
def test_malformed_targets_are_refused_before_any_row(cmd, target: str, message: str) -> None:
    refused(cmd, 2, message, "submit_deletion", "--target", target, "--requested-by", "operator-a")


def test_a_target_no_registered_system_takes_is_refused_before_any_row(cmd) -> None:
    message = "no target system takes 'user:bob' (known: demo:, manual:)"
    refused(cmd, 1, message, "submit_deletion", "--target", "user:bob", "--requested-by", "operator-a")


def test_second_open_request_for_a_target_is_refused(cmd) -> None:
    first = submitted(cmd)
    refused(
        cmd,
        1,
        f"an open deletion request already exists for demo:bob ({first['id']}",
        "submit_deletion",
        "--target",
        "demo:bob",
        "--requested-by",
        "operator-c",
    )


def test_empty_requester_is_refused(cmd) -> None:
    refused(cmd, 2, "requested-by '' is refused", "submit_deletion", "--target", "demo:bob", "--requested-by", " ")


@pytest.mark.parametrize("command", ["approve_deletion", "run_deletion", "show_deletion", "cancel_deletion"])
def test_unknown_request_ids_exit_2(cmd, command: str) -> None:
    extra = {
        "approve_deletion": ["--approved-by", "operator-b", "--inventory-digest", "a" * 64],
        "cancel_deletion": ["--by", "operator-b", "--reason", "r"],
    }.get(command, [])
    missing = str(uuid.uuid4())
    refused(cmd, 2, f"no deletion request with id {missing}", command, missing, *extra)
    refused(cmd, 2, "request id 'not-a-uuid' is not a UUID", command, "not-a-uuid", *extra)


def test_wrong_digest_is_refused_showing_both(cmd) -> None:
    sub = submitted(cmd)
    wrong = "0" * 64
    refused(
        cmd,
        1,
        f"approval digest {wrong} does not match inventory {sub['inventory_digest']}",
        "approve_deletion",
        sub["id"],
        "--approved-by",
        "operator-b",
        "--inventory-digest",
        wrong,
    )


def test_malformed_digest_is_bad_usage(cmd) -> None:
    sub = submitted(cmd)
    refused(
        cmd,
        2,
        "expected 64 hexadecimal characters",
        "approve_deletion",
        sub["id"],
        "--approved-by",
        "operator-b",
        "--inventory-digest",
        "xyz",
    )


def test_missing_digest_exits_2_from_the_command_line(cmd) -> None:
    sub = submitted(cmd)
    before = all_rows()
    proc = subprocess.run(
        manage_argv("approve_deletion", sub["id"], "--approved-by", "operator-b"),
        env=subprocess_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--inventory-digest" in proc.stderr
    assert all_rows() == before


def test_approver_equal_to_requester_is_refused(cmd) -> None:
    sub = submitted(cmd)
    refused(
        cmd,
        1,
        "four eyes: operator-a submitted request",
        "approve_deletion",
        sub["id"],
        "--approved-by",
        "operator-a",
        "--inventory-digest",
        sub["inventory_digest"],
    )


def test_approving_twice_is_refused(cmd) -> None:
    sub = submitted(cmd)
    args = ("approve_deletion", sub["id"], "--approved-by", "operator-b", "--inventory-digest", sub["inventory_digest"])
    assert cmd(*args).code == 0
    refused(cmd, 1, "is approved, not submitted: it cannot be approved again (approved by operator-b", *args)


def test_running_an_unapproved_request_is_refused(cmd, observe) -> None:
    sub = submitted(cmd)
    refused(cmd, 1, "is not approved (status submitted)", "run_deletion", sub["id"])
    digest = json.loads(cmd("show_deletion", sub["id"], "--json").out)["request"]["inventory_digest"]
    assert digest == sub["inventory_digest"]
    shown = json.loads(cmd("show_deletion", sub["id"], "--json").out)
    observe(
        f"run refused ({shown['request']['status']}, not approved), no row changed; digest {digest[:12]} "
        f"unchanged, approvals {len(shown['approvals'])}, owner {shown['request']['owner']}"
    )


def test_running_a_cancelled_request_is_refused(cmd) -> None:
    sub = submitted(cmd)
    assert cmd("cancel_deletion", sub["id"], "--by", "operator-b", "--reason", "customer withdrew").code == 0
    refused(cmd, 1, "is cancelled (its decision log says by whom)", "run_deletion", sub["id"])
    refused(
        cmd,
        1,
        "is already cancelled; nothing to cancel",
        "cancel_deletion",
        sub["id"],
        "--by",
        "operator-c",
        "--reason",
        "r",
    )


def test_cancel_needs_a_reason(cmd) -> None:
    sub = submitted(cmd)
    refused(
        cmd,
        2,
        "a reason is required to cancel a deletion",
        "cancel_deletion",
        sub["id"],
        "--by",
        "operator-b",
        "--reason",
        "",
    )


def _approved(cmd) -> str:
    sub = submitted(cmd)
    args = ("approve_deletion", sub["id"], "--approved-by", "operator-b", "--inventory-digest", sub["inventory_digest"])
    assert cmd(*args).code == 0
    return sub["id"]


def test_unknown_fail_stage_is_bad_usage(cmd) -> None:
    rid = _approved(cmd)
    refused(
        cmd,
        2,
        "--fail-stage 'purge_everything' is not a stage (gate_user, purge_db, purge_agents)",
        "run_deletion",
        rid,
        "--fail-stage",
        "purge_everything",
    )


def test_resume_of_a_request_not_needing_attention_is_refused(cmd) -> None:
    rid = _approved(cmd)
    refused(cmd, 1, "only a request that needs attention can be resumed", "resume_deletion", rid, "--by", "operator-c")


def test_negative_stage_delay_is_bad_usage(cmd) -> None:
    rid = _approved(cmd)
    refused(cmd, 2, "--stage-delay-ms '-5' is out of range (0-3600000)", "run_deletion", rid, "--stage-delay-ms", "-5")


def test_a_named_account_without_the_permission_is_refused(cmd) -> None:
    """A command-line actor that names an account is checked like the admin checks it."""
    from django.contrib.auth.models import Group, Permission, User

    from deletions.models import DeletionDecision
    from ops.groups import ensure_groups

    ensure_groups(Group, Permission)
    User.objects.create_user("support-9", is_staff=True).groups.add(Group.objects.get(name="support (read-only)"))
    User.objects.create_user("approver-9", is_staff=True).groups.add(Group.objects.get(name="approvers"))
    req = submitted(cmd)
    approve = ("approve_deletion", req["id"], "--inventory-digest", req["inventory_digest"], "--approved-by")
    refused(cmd, 1, "(only active staff holding deletions.approve_deletionrequest)", *approve, "support-9")
    refused(
        cmd,
        1,
        "(only active staff holding deletions.cancel_deletionrequest)",
        "cancel_deletion",
        req["id"],
        "--by",
        "support-9",  # read-only (approvers may cancel: a case back in review is theirs)
        "--reason",
        "no",
    )
    ran = cmd(*approve, "approver-9")
    assert ran.code == 0, ran.err
    assert json.loads(ran.out)["approved_by"] == "approver-9"
    decision = DeletionDecision.objects.select_related("actor").get(request_id=req["id"], action="approve")
    assert decision.actor is not None and (decision.actor_label, decision.actor.username) == ("approver-9",) * 2


def test_show_deletion_says_what_an_approver_verifies(cmd) -> None:
    req = submitted(cmd)
    shown = cmd("show_deletion", req["id"])
    assert shown.code == 0, shown.err
    assert "Community B (demo)" in shown.out and "current member" in shown.out
    assert "former member (left the community)" in shown.out and "rules v1" in shown.out
    assert f"digest {req['inventory_digest']} covers the target demo:bob" in shown.out
    as_json = json.loads(cmd("show_deletion", req["id"], "--json").out)
    assert [c["role_words"] for c in as_json["proposal"]["communities"]] == [
        "current member",
        "former member (left the community)",
        "their own records, in no community",  # always last: the effect the completeness walk runs in
    ]


def test_approve_dry_run_checks_every_rule_and_writes_nothing(cmd) -> None:
    req = submitted(cmd)
    before = all_rows()
    ran = cmd(
        "approve_deletion",
        req["id"],
        "--approved-by",
        "operator-b",
        "--inventory-digest",
        req["inventory_digest"],
        "--dry-run",
    )
    assert ran.code == 0, ran.err
    out = json.loads(ran.out)
    assert out["dry_run"] and out["would_approve"] and out["approved_by"] == "operator-b"
    assert any("Community C (demo)" in line for line in out["what_will_be_deleted"])
    assert all_rows() == before  # no approval, no decision, no status change


def test_approve_dry_run_by_the_submitter_is_the_same_one_line_refusal(cmd) -> None:
    req = submitted(cmd)
    refused(
        cmd,
        1,
        "four eyes: operator-a submitted request",
        "approve_deletion",
        req["id"],
        "--approved-by",
        "operator-a",
        "--inventory-digest",
        req["inventory_digest"],
        "--dry-run",
    )
