"""The seed's walkthrough through the commands: approve, step, branch, fail and retry."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from deletions.rules.inventory import COMMUNITY_B, COMMUNITY_C
from tests import target as demo
from tests.deletions.helpers import current, show_rows

pytestmark = pytest.mark.django_db(transaction=True)
B, C, OWN = COMMUNITY_B, COMMUNITY_C, demo.OWN_RECORDS


def submit(cmd, target: str = "demo:workflow-1") -> dict:
    ran = cmd("submit_deletion", "--target", target, "--requested-by", "operator-a")
    assert ran.code == 0, ran.err
    return json.loads(ran.out)


def submit_approve(cmd, target: str = "demo:workflow-1", no_agents_in: tuple[str, ...] = ()) -> str:
    for community in no_agents_in:  # the person has no agents there in the demo application
        demo.enroll(target)
        demo.set_agents(target, community, 0)
    sub = submit(cmd, target)
    ran = cmd(
        "approve_deletion", sub["id"], "--approved-by", "operator-b", "--inventory-digest", sub["inventory_digest"]
    )
    assert ran.code == 0, ran.err
    return sub["id"]


def test_submit_prints_request_with_b_then_c_inventory(cmd) -> None:
    sub = submit(cmd)
    assert sub["status"] == "submitted"
    assert [c["id"] for c in sub["inventory"]["communities"]] == [B, C, OWN]  # their own records always last
    assert len(sub["inventory_digest"]) == 64
    request, stages, approvals = show_rows(sub["id"])
    assert request["status"] == "submitted" and stages == [] and approvals == []


def test_approve_saves_one_approval_and_zero_stage_rows(cmd) -> None:
    rid = submit_approve(cmd)
    request, stages, approvals = show_rows(rid)
    assert request["status"] == "approved"
    assert len(approvals) == 1 and approvals[0]["approved_by"] == "operator-b"
    assert stages == []
    assert request["lease_owner"] is None


EXPECTED_STEPS = [
    # (handler completed, current stage after the command)
    ("gate_user", [("purge_db", B, "pending")]),
    ("purge_db", [("purge_agents", B, "pending")]),
    ("purge_agents", [("purge_db", C, "pending")]),
    ("purge_db", [("purge_agents", C, "pending")]),
    ("purge_agents", [("purge_db", OWN, "pending")]),
    ("purge_db", []),  # their own records: nothing of a demo person there, the completeness walk run
]


def test_six_next_step_invocations_match_the_seed_table(cmd) -> None:
    rid = submit_approve(cmd)
    for n, (_handler, expected_current) in enumerate(EXPECTED_STEPS, start=1):
        ran = cmd("run_deletion", rid, "--next-step", "--executor-id", f"worker-{n}")
        assert ran.code == 0, ran.err
        request, stages, _ = show_rows(rid)
        assert current(stages) == expected_current, f"after invocation {n}"
        assert len(stages) == n + (1 if expected_current else 0)
        earlier = [s for s in stages if not s["is_current"]]
        assert all(s["status"] == "completed" for s in earlier)
        assert request["lease_owner"] is None and request["lease_expires_at"] is None
        assert request["lease_generation"] == n
    request, stages, _ = show_rows(rid)
    assert request["status"] == "completed" and request["completed_at"] is not None
    assert [s["metadata_json"]["decision"]["transition"] for s in stages] == [
        "enter_communities",
        "purge_agents",
        "community_complete",
        "purge_agents",
        "community_complete",
        "community_complete",
    ]


def test_rerunning_a_completed_request_is_read_only_and_exits_0(cmd, observe) -> None:
    rid = submit_approve(cmd)
    assert cmd("run_deletion", rid).code == 0
    before = show_rows(rid)
    ran = cmd("run_deletion", rid, "--executor-id", "late-worker")
    assert ran.code == 0 and "already completed" in ran.out
    assert show_rows(rid) == before
    observe(f"rerun exit {ran.code}, '{ran.out.strip()[:40]}...', every row unchanged ({before[0]['status']})")


def test_branching_all_at_once_skips_c_agents(cmd) -> None:
    rid = submit_approve(cmd, no_agents_in=(C,))
    ran = cmd("run_deletion", rid, "--executor-id", "worker-a")
    assert ran.code == 0, ran.err
    request, stages, _ = show_rows(rid)
    assert request["status"] == "completed"
    assert [(s["stage"], str(s["target_community_id"]) if s["target_community_id"] else None) for s in stages] == [
        ("gate_user", None),
        ("purge_db", B),
        ("purge_agents", B),
        ("purge_db", C),
        ("purge_db", OWN),
    ]
    c_db = stages[-2]["metadata_json"]
    assert c_db["result"]["has_agents"] is False
    assert c_db["decision"]["transition"] == "community_complete"


def test_branching_step_by_step_keeps_the_saved_b_decision(cmd) -> None:
    rid = submit_approve(cmd, no_agents_in=(B,))
    assert cmd("run_deletion", rid, "--next-step").code == 0
    assert cmd("run_deletion", rid, "--next-step").code == 0
    _, stages, _ = show_rows(rid)
    assert current(stages) == [("purge_db", C, "pending")]
    b_db = next(s for s in stages if s["stage"] == "purge_db" and str(s["target_community_id"]) == B)
    saved = dict(b_db["metadata_json"])
    assert saved["decision"]["transition"] == "community_complete"
    assert cmd("run_deletion", rid).code == 0
    request, stages, _ = show_rows(rid)
    assert request["status"] == "completed"
    b_db_after = next(s for s in stages if s["id"] == b_db["id"])
    assert b_db_after["metadata_json"] == saved
    assert not any(s["stage"] == "purge_agents" and str(s["target_community_id"]) == B for s in stages)
    assert [s["stage"] for s in stages if str(s["target_community_id"]) == C] == ["purge_db", "purge_agents"]


def test_failure_then_retry_after_deadline_resumes_the_same_row(cmd, observe) -> None:
    rid = submit_approve(cmd)
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        ran = cmd("run_deletion", rid, "--executor-id", "worker-a", "--fail-stage", "purge_db")
        assert ran.code == 1
        assert "retry not before" in ran.err
        request, stages, _ = show_rows(rid)
        assert request["status"] == "retry_wait"
        assert request["retry_count"] == 1
        assert request["next_attempt_at"] == start + timedelta(seconds=30)
        assert "injected failure in purge_db" in request["last_error"]
        assert request["lease_owner"] is None
        gate = next(s for s in stages if s["stage"] == "gate_user")
        assert gate["status"] == "completed" and not gate["is_current"]
        assert current(stages) == [("purge_db", B, "failed")]
        failed_row = next(s for s in stages if s["is_current"])
        first_started = failed_row["started_at"]

        early = cmd("run_deletion", rid, "--executor-id", "worker-b")
        assert early.code == 1 and "not due until" in early.err
        assert show_rows(rid)[0] == request

    with time_machine.travel(start + timedelta(seconds=31), tick=False):
        ran = cmd("run_deletion", rid, "--executor-id", "worker-b")
        assert ran.code == 0, ran.err
    request, stages, _ = show_rows(rid)
    assert request["status"] == "completed"
    assert request["retry_count"] == 0 and request["next_attempt_at"] is None and request["last_error"] is None
    resumed = next(s for s in stages if s["id"] == failed_row["id"])
    assert resumed["status"] == "completed"
    assert resumed["started_at"] == first_started
    assert resumed["last_error"] is None
    assert len([s for s in stages if s["stage"] == "purge_db" and str(s["target_community_id"]) == B]) == 1
    observe(
        f"B purge_db failed+current, early retry exit {early.code} ('not due'); after 31 s worker-b resumed row "
        f"{str(failed_row['id'])[:8]} (first start kept: {resumed['started_at'] == first_started}), request "
        f"{request['status']}"
    )


def test_ten_consecutive_failures_need_an_operator(cmd) -> None:
    rid = submit_approve(cmd)
    at = timezone.now()
    for n in range(1, 11):
        with time_machine.travel(at, tick=False):
            ran = cmd("run_deletion", rid, "--fail-stage", "gate_user")
            assert ran.code == 1
        request, _, _ = show_rows(rid)
        assert request["retry_count"] == n
        at = (request["next_attempt_at"] or at) + timedelta(seconds=1)
    assert request["status"] == "needs_attention"
    with time_machine.travel(at + timedelta(days=1), tick=False):
        refused = cmd("run_deletion", rid)
        assert refused.code == 1 and "needs attention" in refused.err
        resumed = cmd("resume_deletion", rid, "--by", "operator-c")
        assert resumed.code == 0, resumed.err
        assert cmd("run_deletion", rid).code == 0
    assert show_rows(rid)[0]["status"] == "completed"


def test_show_deletion_prints_chain_and_json(cmd) -> None:
    rid = submit_approve(cmd, no_agents_in=(C,))
    cmd("run_deletion", rid)
    text = cmd("show_deletion", rid)
    assert text.code == 0 and "status=completed" in text.out and "community_complete" in text.out
    data = json.loads(cmd("show_deletion", rid, "--json").out)
    assert [s["stage"] for s in data["stages"]] == ["gate_user", "purge_db", "purge_agents", "purge_db", "purge_db"]
    assert data["approvals"][0]["approved_by"] == "operator-b"


def test_expired_approval_sends_the_request_back_to_review(cmd, observe) -> None:
    rid = submit_approve(cmd)
    with time_machine.travel(timezone.now() + timedelta(days=7, seconds=1), tick=False):
        ran = cmd("run_deletion", rid)
        assert ran.code == 1 and "expired at" in ran.err and "back in review" in ran.err
        request, stages, approvals = show_rows(rid)
        assert request["status"] == "submitted" and request["lease_generation"] == 0
        assert stages == [] and len(approvals) == 1
        digest = json.loads(cmd("show_deletion", rid, "--json").out)["request"]["inventory_digest"]
        again = cmd("approve_deletion", rid, "--approved-by", "operator-c", "--inventory-digest", digest)
        assert again.code == 0, again.err
        assert cmd("run_deletion", rid).code == 0
    request, _, approvals = show_rows(rid)
    assert request["status"] == "completed" and [a["approved_by"] for a in approvals] == ["operator-b", "operator-c"]
    observe(
        f"run after 7 days refused; back to submitted with lease generation 0 and 0 stages; a new approval by "
        f"{approvals[-1]['approved_by']} let it run: {request['status']}"
    )
