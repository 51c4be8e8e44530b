"""Which buttons a case page offers, by status and permission. Pure."""

from __future__ import annotations

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
