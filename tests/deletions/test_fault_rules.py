"""The rules of faults and of records of effects applied by hand, as tables. Pure: no database."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from deletions.rules import custody

AT = datetime(2026, 12, 1, 10, 2, tzinfo=UTC)
INTEGRITY, AFTER = "integrity_fault", "applied_after_withdrawal"


@pytest.mark.parametrize(
    ("open_faults", "applied_after", "refused"),
    [
        ((), False, ""),  # no fault: nothing in the way
        ((INTEGRITY,), False, "an integrity fault is open on this case, so it cannot be approved"),
        ((AFTER,), True, "applied by hand after the approval was withdrawn (its alarm is open)"),
        ((INTEGRITY, AFTER), True, "(its alarm is open)"),  # the effect after withdrawal is said first
        ((), True, "such a case is cancelled, never completed"),  # its alarm closed: still never approved
    ],
)
def test_a_fault_stops_approval_and_an_effect_after_withdrawal_stops_it_for_good(
    open_faults, applied_after, refused
) -> None:
    said = custody.faults_refusal("approved", open_faults=open_faults, applied_after=applied_after)
    assert (said == "") if not refused else (refused in said)


@pytest.mark.parametrize(
    ("kind", "open_faults", "actor", "submitter", "recorders", "refused"),
    [
        (INTEGRITY, {INTEGRITY}, "approver-1", "", (), ""),  # a named person, not the submitter
        (AFTER, {AFTER}, "approver-1", "", ("operator-c",), ""),
        (AFTER, {AFTER}, "operator-c", "", ("operator-c",), "operator-c recorded the effect"),  # not who applied it
        (INTEGRITY, {INTEGRITY}, "operator-a", "operator-a", (), "four eyes: operator-a submitted"),
        (INTEGRITY, {AFTER}, "approver-1", "", (), "no integrity_fault alarm is open"),
        ("effect_unknown", {INTEGRITY}, "approver-1", "", (), "is not an alarm a person closes"),  # clears by itself
    ],
)
def test_who_may_close_a_fault(kind, open_faults, actor, submitter, recorders, refused) -> None:
    said = custody.close_refusal(kind, open_faults=open_faults, actor=actor, submitter=submitter, recorded_by=recorders)
    assert (said == "") if not refused else (refused in said)


def test_a_record_is_final_for_its_hand_over() -> None:
    assert custody.record_refusal(operation_id="op-1", recorded=None) == ""
    said = custody.record_refusal(operation_id="op-1", recorded=("operator-c", True, AT))
    assert said.startswith("operation op-1 was already recorded applied by operator-c at 2026-12-01 10:02:00 UTC")
    assert "a record is final" in said and "correct_effect" in said


@pytest.mark.parametrize(
    ("actor", "submitter", "recorded_by", "corrected_by", "stage_done", "refused"),
    [
        ("approver-1", "", "operator-c", None, False, ""),  # an approver who made neither
        ("approver-1", "", None, None, False, "nothing to correct"),
        ("operator-c", "", "operator-c", None, False, "operator-c made that record"),
        ("operator-a", "operator-a", "operator-c", None, False, "four eyes: operator-a submitted"),
        ("approver-1", "", "operator-c", "approver-2", False, "already corrected by approver-2"),
        ("approver-1", "", "operator-c", None, True, "the saved evidence is never rewritten"),
    ],
)
def test_who_may_correct_a_record(actor, submitter, recorded_by, corrected_by, stage_done, refused) -> None:
    said = custody.correction_refusal(
        actor=actor, submitter=submitter, recorded_by=recorded_by, corrected_by=corrected_by, stage_done=stage_done
    )
    assert (said == "") if not refused else (refused in said)


def test_only_an_applied_purge_db_says_whether_agents_are_left() -> None:
    """One rule for a record by hand and its correction (`custody.agents_refusal`)."""
    assert custody.agents_refusal(stage="purge_db", applied=True, has_agents=False) == ""
    assert custody.agents_refusal(stage="purge_db", applied=False, has_agents=None) == ""
    assert custody.agents_refusal(stage="gate_user", applied=True, has_agents=None) == ""
    assert custody.agents_refusal(stage="purge_db", applied=True, has_agents=None) == (
        "purge_db applied: say whether agents are left (--has-agents yes|no)"
    )
    assert custody.agents_refusal(stage="gate_user", applied=True, has_agents=True) == (
        "--has-agents says what an applied purge_db left; this is gate_user"
    )
    assert custody.agents_refusal(stage="purge_db", applied=False, has_agents=True) == (
        "--has-agents says what an applied purge_db left; this is purge_db, recorded as not applied"
    )
