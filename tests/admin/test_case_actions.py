"""Which buttons a case page offers, by status and permission. Pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from deletions import case as deletion_case
from retirements import case as retirement_case

ALL_DELETION = {
    "deletions.approve_deletionrequest",
    "deletions.cancel_deletionrequest",
    "deletions.run_deletionrequest",
}
ALL_RETIREMENT = {
    "retirements.hold_retirementrequest",
    "retirements.cancel_retirementrequest",
    "retirements.resume_retirementrequest",
    "retirements.retry_notices_retirementrequest",
}


@pytest.mark.parametrize(
    ("status", "cancel_requested", "offered"),
    [
        ("submitted", False, {"approve", "cancel"}),
        ("approved", False, {"cancel", "run"}),
        ("running", False, {"cancel", "run"}),
        ("running", True, {"run"}),  # cancellation already recorded
        ("retry_wait", False, {"cancel", "run"}),
        ("needs_attention", False, {"cancel", "resume"}),
        ("needs_review", False, {"approve", "cancel"}),  # refused at the boundary: approve again or cancel
        ("completed", False, set()),
        ("cancelled", False, set()),
    ],
)
def test_deletion_actions_by_status(status, cancel_requested, offered) -> None:
    req = SimpleNamespace(status=status, cancel_requested_at=object() if cancel_requested else None)
    got = deletion_case.actions(req, ALL_DELETION)
    assert {k for k, v in got.items() if v} == offered
    assert not any(deletion_case.actions(req, set()).values())  # nothing without permissions


@pytest.mark.parametrize(
    ("status", "offered"),
    [
        ("waiting", {"hold", "cancel", "resume"}),
        ("held", {"release", "cancel", "resume"}),
        ("executing", set()),
        ("completed", set()),
        ("cancelled", set()),
        ("closed", set()),
    ],
)
def test_retirement_actions_by_status(status, offered) -> None:
    got = retirement_case.actions(SimpleNamespace(status=status), ALL_RETIREMENT)
    assert {k for k, v in got.items() if v} == offered
    assert not any(retirement_case.actions(SimpleNamespace(status=status), set()).values())


NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
LIVE = NOW + timedelta(seconds=30)
GONE = NOW - timedelta(seconds=1)


@pytest.mark.parametrize(
    ("status", "lease", "open_question", "owner", "expected"),
    [
        # Waiting for approval: the approvers, never the submitter.
        ("submitted", None, "waiting for a second operator", "operator-a", "approvers (group)"),
        # Refused at the boundary: back to the approvers.
        ("needs_review", None, "approval expired", "approvers", "approvers (group)"),
        # A worker holds a live lease: the system, named by executor and generation.
        ("running", LIVE, "", "approver-1", "system: worker-a (generation 3)"),
        ("approved", LIVE, "", "approver-1", "system: worker-a (generation 3)"),
        ("approved", None, "", "approver-1", "system: the next worker (dispatcher)"),
        # The lease ran out mid-stage: the operators on call, not the approver.
        ("running", GONE, "", "approver-1", "operators on call (group)"),
        ("retry_wait", None, "", "operator-a", "system: retry at the next attempt"),
        # Effect unknown and needs attention: a named owner, else the operators on call.
        ("retry_wait", None, "did operation X take effect?", "operator-c", "operator-c"),
        ("retry_wait", None, "did operation X take effect?", "operator-a", "operators on call (group)"),
        ("needs_attention", None, "failed 10 times", "", "operators on call (group)"),
        ("completed", None, "", "approver-1", "-"),
        ("cancelled", None, "", "approver-1", "-"),
    ],
)
def test_the_responsible_person_follows_the_case(status, lease, open_question, owner, expected) -> None:
    req = SimpleNamespace(
        status=status,
        lease_owner="worker-a" if lease else None,
        lease_expires_at=lease,
        lease_generation=3,
        open_question=open_question,
        owner=owner,
        requested_by="operator-a",
    )
    assert deletion_case.responsible(req, NOW) == expected


def test_an_overdue_next_check_is_marked() -> None:
    late = SimpleNamespace(status="retry_wait", next_check_at=NOW - timedelta(minutes=5), next_attempt_at=None)
    assert deletion_case.overdue(late, NOW) is True
    assert (
        deletion_case.overdue(SimpleNamespace(status="completed", next_check_at=GONE, next_attempt_at=None), NOW)
        is False
    )
    assert (
        deletion_case.overdue(SimpleNamespace(status="retry_wait", next_check_at=LIVE, next_attempt_at=None), NOW)
        is False
    )


@pytest.mark.parametrize(
    ("status", "failed_notices", "offered"),
    [
        ("waiting", True, True),
        ("executing", True, True),  # destruction_started failed: still a way forward
        ("waiting", False, False),  # nothing failed: nothing to retry
        ("completed", True, False),
    ],
)
def test_retry_notices_is_offered_only_where_a_notice_failed(status, failed_notices, offered) -> None:
    got = retirement_case.actions(SimpleNamespace(status=status), ALL_RETIREMENT, failed_notices=failed_notices)
    assert got["retry_notices"] is offered
