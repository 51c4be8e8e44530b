"""The rules of applying a deletion again after its receiver's database was restored, as tables: when a
receiver went back in time, which completed effects it may have lost, and whether the original approval
still allows the effect again. Pure: no database."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from deletions import authority, case
from deletions.contract import AuthorityFacts
from deletions.reapply import may_be_lost
from deletions.targets.http import State, went_back

NOW = datetime(2026, 12, 6, 11, 0, tzinfo=UTC)
A, B = "0b3b6a4e-0000-4000-8000-00000000000a", "0b3b6a4e-0000-4000-8000-00000000000b"


@pytest.mark.parametrize(
    ("held", "reported", "words"),
    [
        (None, State(A, 0), ""),  # nothing held yet (a receiver registered before any evidence): nothing to compare
        (State(A, 5), None, ""),  # a receiver that keeps no state (the demo path) says nothing of it
        (State(A, 5), State(A, 5), ""),  # the same: nothing lost
        (State(A, 5), State(A, 9), ""),  # more: it applied what we have not seen the evidence of yet
        (State(A, 5), State(A, 2), "it reports 2 applied operations, the back-office holds signed evidence of 5"),
        (State(A, 5), State(B, 7), f"it reports incarnation {B} with 7 applied operations"),  # installed afresh
    ],
)
def test_a_receiver_went_back_in_time_when_it_reports_less_or_another_incarnation(
    held: State | None, reported: State | None, words: str
) -> None:
    said = went_back(held, reported, "forum at http://r/receiver/v1/")
    assert (
        (words in said and said.startswith("forum at http://r/receiver/v1/ went back in time")) if words else not said
    )


def _evidence(incarnation: str, applied: int) -> dict[str, Any]:
    return {"receiver_state": {"incarnation": incarnation, "applied": applied}}


@pytest.mark.parametrize(
    ("evidence", "reported", "lost"),
    [
        (_evidence(A, 3), State(A, 2), True),  # numbered past what it reports: may be lost
        (_evidence(A, 2), State(A, 2), False),  # within what it reports: in the backup it was restored from
        (_evidence(A, 1), State(B, 9), True),  # another incarnation: anything may be lost
        ({"rows_deleted": 3}, State(A, 9), True),  # no number (evidence from before receivers kept one): ask
        (_evidence(A, 1), None, True),  # the receiver reports nothing: ask
    ],
)
def test_an_effect_may_be_lost_when_its_evidence_is_past_what_the_receiver_reports(
    evidence: dict[str, Any], reported: State | None, lost: bool
) -> None:
    assert may_be_lost(evidence, reported) is lost


FACTS = AuthorityFacts(
    now=NOW,
    status="completed",
    cancel_requested=False,
    stored_digest="d1",
    inventory_version=1,
    rules_version=1,
    approval_id=uuid.uuid4(),
    approval_digest="d1",
    approval_inventory_version=1,
    approval_rules_version=1,
    approval_expires_at=None,  # long expired: not asked again (every effect it approved landed once)
    approval_revoked_at=None,
    approver="operator-b",
    approver_may=True,
    requester="operator-a",
    requester_may=True,
    same_person=False,
)


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        ({}, ""),  # the original approval stands behind it: applied again
        ({"approval_id": None}, "no approval covers this request"),
        ({"approval_revoked_at": NOW}, "approval revoked at 2026-12-06 11:00:00 UTC"),
        ({"approval_digest": "d2"}, "approval covers digest d2, not the stored inventory d1"),  # a fault
        ({"approver_may": False}, "approver operator-b is no longer active staff"),  # handed to a person
        ({"requester_may": False}, "requester operator-a is no longer active staff"),
        ({"same_person": True}, "four eyes"),
    ],
)
def test_an_effect_is_applied_again_only_while_the_original_approval_still_allows_it(
    change: dict[str, Any], refused: str
) -> None:
    said = authority.reapply_refusal(dataclasses.replace(FACTS, **change))
    assert (said is not None and refused in said.rule) if refused else said is None


@pytest.mark.parametrize(
    ("answers", "words"),
    [
        ([], ""),
        ([{"outcome": "applied"}] * 3, "3 effects re-applied after the application's database was restored"),
        (
            [{"outcome": "applied"}, {"outcome": "handed"}, None],
            "1 effect re-applied after the application's database was restored; 1 effect handed to a person "
            "(the original approval no longer allows it); 1 effect sent again, waiting for the receiver's answer",
        ),
    ],
)
def test_the_case_says_what_was_applied_again_in_one_line(answers: list[dict[str, Any] | None], words: str) -> None:
    assert case.reapplied_words(answers) == words
