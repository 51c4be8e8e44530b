"""Pure policy: rules v1, retry delays, reconstruction. No database."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from deletions.contract import (
    Advance,
    CancelFacts,
    EndCancelled,
    Initialize,
    RequestSnapshot,
    Resume,
    StageSnapshot,
    WaitUntil,
)
from deletions.errors import WorkflowError
from deletions.retry import decide_retry, retry_delay
from deletions.rules import custody, workflow
from deletions.rules.decide import decide
from deletions.rules.inventory import COMMUNITY_B, COMMUNITY_C, build_inventory

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
INV = build_inventory(
    "demo:alice", [{"id": COMMUNITY_B, "role": "participant"}, {"id": COMMUNITY_C, "role": "former_participant"}]
)


@pytest.mark.parametrize(
    ("stage", "result", "expected"),
    [
        # gate_user always enters the communities
        ("gate_user", {"gated": True}, "enter_communities"),
        # purge_db branches on the saved boolean has_agents
        ("purge_db", {"has_agents": True}, "purge_agents"),
        ("purge_db", {"has_agents": False}, "community_complete"),
        # purge_agents always completes its community
        ("purge_agents", {"agents_removed": 0}, "community_complete"),
    ],
)
def test_every_stage_result_maps_to_one_decision(stage: str, result: dict[str, Any], expected: str) -> None:
    assert workflow.transition_for(stage, result) == expected


@pytest.mark.parametrize(
    ("stage", "result", "message"),
    [
        # missing has_agents is an error, not an implicit skip
        ("purge_db", {}, "no boolean has_agents"),
        ("purge_db", {"has_agents": "yes"}, "no boolean has_agents"),
        ("purge_db", None, "no boolean has_agents"),
        # stages the v1 rules do not know
        ("purge_files", {}, "unknown stage 'purge_files'"),
    ],
)
def test_results_that_allow_no_decision_are_refused(stage: str, result: Any, message: str) -> None:
    with pytest.raises(WorkflowError, match=message):
        workflow.transition_for(stage, result)


@pytest.mark.parametrize(
    ("failures", "delay"),
    [
        (1, timedelta(seconds=30)),  # first failure: 30 s, as in the seed
        (2, timedelta(seconds=60)),  # doubling
        (3, timedelta(seconds=120)),
        (7, timedelta(seconds=1920)),
        (8, timedelta(hours=1)),  # 3840 s capped at one hour
        (9, timedelta(hours=1)),
    ],
)
def test_retry_delay_doubles_from_30_seconds_capped_at_one_hour(failures: int, delay: timedelta) -> None:
    assert retry_delay(failures) == delay
    assert decide_retry(failures, NOW).next_attempt_at == NOW + delay


def test_tenth_consecutive_failure_needs_attention() -> None:
    decision = decide_retry(10, NOW)
    assert decision.needs_attention and decision.next_attempt_at is None
    assert not decide_retry(9, NOW).needs_attention


# -- reconstruction -------------------------------------------------------


def row(
    stage: str,
    community: str | None,
    *,
    prev: StageSnapshot | None,
    status: str = "completed",
    current: bool = False,
    result: Any = None,
    decision: str | None = None,
    inputs: dict[str, Any] | None = None,
) -> StageSnapshot:
    meta: dict[str, Any] = {
        "inputs": inputs
        if inputs is not None
        else ({"target": "demo:alice"} | ({"community_id": community} if community else {})),
        "previous_stage_id": str(prev.id) if prev else None,
    }
    if result is not None:
        meta["result"] = result
    if decision is not None:
        meta["decision"] = {"transition": decision, "rules_version": 1}
    return StageSnapshot(
        id=uuid.uuid4(),
        stage=stage,
        community_id=community,
        status=status,
        is_current=current,
        metadata=meta,
        started_at=NOW,
        finished_at=None,
        last_error=None,
        operation_id=uuid.uuid4(),
        attempts=1,
    )


def snapshot(status: str = "running", next_attempt_at: datetime | None = None) -> RequestSnapshot:
    return RequestSnapshot(
        id=uuid.uuid4(),
        status=status,
        inventory=INV,
        inventory_version=1,
        retry_count=0,
        next_attempt_at=next_attempt_at,
        cancel_requested=False,
    )


def gate_then_b_db(**b_db: Any) -> list[StageSnapshot]:
    gate = row("gate_user", None, prev=None, result={"gated": True}, decision="enter_communities")
    return [gate, row("purge_db", COMMUNITY_B, prev=gate, current=True, **b_db)]


def test_empty_history_initializes_gate_user() -> None:
    op = decide(snapshot("approved"), [], NOW)
    assert isinstance(op, Initialize)
    assert op.first.stage == "gate_user" and op.first.inputs == {"target": "demo:alice"}


def test_completed_current_row_advances_from_its_saved_result() -> None:
    history = gate_then_b_db(result={"has_agents": False})
    op = decide(snapshot(), history, NOW)
    assert isinstance(op, Advance)
    assert op.decision["transition"] == "community_complete"
    assert op.successor is not None and (op.successor.stage, op.successor.community_id) == ("purge_db", COMMUNITY_C)


def test_pending_or_running_current_row_resumes() -> None:
    for status in ("pending", "running"):
        history = gate_then_b_db(status=status)
        assert decide(snapshot(), history, NOW) == Resume(history[-1].id)


def test_failed_row_waits_until_deadline_then_resumes() -> None:
    history = gate_then_b_db(status="failed")
    later = NOW + timedelta(seconds=30)
    assert decide(snapshot("retry_wait", later), history, NOW) == WaitUntil(later)
    assert decide(snapshot("retry_wait", later), history, later) == Resume(history[-1].id)


def test_saved_community_complete_covers_a_skipped_agents_stage() -> None:
    gate = row("gate_user", None, prev=None, result={"gated": True}, decision="enter_communities")
    b_db = row("purge_db", COMMUNITY_B, prev=gate, result={"has_agents": False}, decision="community_complete")
    c_db = row("purge_db", COMMUNITY_C, prev=b_db, current=True, status="pending")
    progress = workflow.reconstruct([gate, b_db, c_db], INV, 1)
    assert progress.covered == [COMMUNITY_B]
    assert progress.current is c_db


def _broken_histories() -> list[tuple[str, list[StageSnapshot], str]]:
    gate = row("gate_user", None, prev=None, result={"gated": True}, decision="enter_communities")
    orphan_prev = row("gate_user", None, prev=None, result={"gated": True}, decision="enter_communities")
    missing_result_gate = row("gate_user", None, prev=None, decision="enter_communities")
    no_agents_flag = row("purge_db", COMMUNITY_B, prev=gate, result={}, decision="purge_agents")
    return [
        ("unknown stage", [gate, row("purge_files", COMMUNITY_B, prev=gate, current=True)], "unknown stage"),
        (
            "disconnected: predecessor missing",
            [gate, row("purge_db", COMMUNITY_B, prev=orphan_prev, current=True)],
            "points to missing stage",
        ),
        (
            "disconnected: a row off the chain",
            [gate, orphan_prev, row("purge_db", COMMUNITY_B, prev=gate, current=True)],
            "not on the chain",
        ),
        (
            "transitioned without a result",
            [missing_result_gate, row("purge_db", COMMUNITY_B, prev=missing_result_gate, current=True)],
            "without a saved result",
        ),
        (
            "missing has_agents",
            [gate, no_agents_flag, row("purge_agents", COMMUNITY_B, prev=no_agents_flag, current=True)],
            "no boolean has_agents",
        ),
        (
            "inputs disagree with the inventory",
            [
                gate,
                row(
                    "purge_db",
                    COMMUNITY_B,
                    prev=gate,
                    current=True,
                    inputs={"target": "demo:mallory", "community_id": COMMUNITY_B},
                ),
            ],
            "disagree with the approved inventory",
        ),
        (
            "community not in the inventory",
            [gate, row("purge_db", "00000000-0000-0000-0000-00000000000f", prev=gate, current=True)],
            "expected purge_db for 00000000-0000-0000-0000-00000000000b",
        ),
        (
            "two current rows",
            [
                row("gate_user", None, prev=None, current=True),
                row("gate_user", None, prev=None, current=True),
            ],
            "expected exactly one",
        ),
        ("started history without a current row", [gate], "expected exactly one"),
    ]


@pytest.mark.parametrize(
    ("name", "history", "message"), _broken_histories(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_reconstruction_refuses_broken_history(name: str, history: list[StageSnapshot], message: str) -> None:
    with pytest.raises(WorkflowError, match=message):
        decide(snapshot(), history, NOW)


def test_reconstruction_refuses_oversized_inventory() -> None:
    big = {**INV, "communities": [{"id": str(uuid.UUID(int=i + 1))} for i in range(1_001)]}
    with pytest.raises(WorkflowError, match="more than 1,000 communities"):
        workflow.reconstruct([], big, 1)


def test_previous_stage_from_another_request_is_refused() -> None:
    with pytest.raises(WorkflowError, match="does not belong to request"):
        decide(snapshot(), gate_then_b_db(status="pending"), NOW, previous_stage_id=uuid.uuid4())


# -- cancellation ---------------------------------------------------------


@pytest.mark.parametrize(
    ("submitted", "status", "expected"),
    [
        (True, "running", Resume),  # submitted, outcome unknown: looked up before the request ends
        (True, "failed", Resume),
        (False, "running", EndCancelled),  # never sent: nothing to look up
        (False, "pending", EndCancelled),
        (True, "completed", EndCancelled),  # settled: it ends at this boundary
    ],
)
def test_a_cancellation_ends_at_the_boundary_only_once_no_submission_is_unsettled(
    submitted: bool, status: str, expected: type
) -> None:
    import dataclasses

    history = gate_then_b_db(status=status, result={"has_agents": True} if status == "completed" else None)
    history[-1] = dataclasses.replace(history[-1], submitted_at=NOW if submitted else None)
    cancelled = dataclasses.replace(snapshot(), cancel_requested=True)
    assert isinstance(decide(cancelled, history, NOW), expected)


@pytest.mark.parametrize(
    ("facts", "ends_now", "holder", "says"),
    [
        (CancelFacts(False, None, False, 0), True, None, "cancelled by operator-c: why"),
        (CancelFacts(False, None, True, 2), True, None, "2 completed stage(s) stay done"),
        (CancelFacts(True, None, True, 1), False, None, "the worker stops at its next transition"),
        # a submission whose outcome is unknown is never claimed prevented, worker or not
        (CancelFacts(True, (uuid.UUID(int=7), "purge_db"), True, 1), False, "operators on call", "being looked up"),
        (CancelFacts(False, (uuid.UUID(int=7), "purge_db"), True, 1), False, "operators on call", "being looked up"),
    ],
)
def test_a_cancellation_is_planned_from_what_it_meets(facts, ends_now: bool, holder, says: str) -> None:
    plan = custody.cancel(facts, by="operator-c", reason="why", now=NOW)
    assert plan.ends_now is ends_now and says in plan.action
    assert (plan.custody.owner if plan.custody else None) == holder
    if plan.custody:
        assert str(uuid.UUID(int=7)) in plan.custody.open_question and plan.custody.next_check_at == NOW
