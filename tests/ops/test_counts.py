"""The overview's counts stop at a cap, so they cost the same at 100 or 100,000 cases."""

from __future__ import annotations

import pytest

from core.store import capped_counts, shown_count
from deletions.models import DeletionRequest
from tests.conftest import submit_and_approve

pytestmark = pytest.mark.django_db
ORDER = ("-created_at", "-id")  # the rest of the index deletion_status_newest


def test_counts_are_exact_below_the_cap_and_marked_above_it() -> None:
    for n in range(4):
        submit_and_approve(f"demo:count-{n}")
    counts = capped_counts(DeletionRequest, "status", ["approved", "completed"], index_order=ORDER, cap=2)
    assert counts == {"approved": 3, "completed": 0}  # at most cap + 1 read
    assert shown_count(counts["approved"], cap=2) == "2+" and shown_count(counts["completed"], cap=2) == "0"
    assert capped_counts(DeletionRequest, "status", ["approved"], index_order=ORDER) == {"approved": 4}
    assert shown_count(10_001) == "10,000+" and shown_count(10_000) == "10,000"


def test_only_code_values_are_written_into_the_statement() -> None:
    with pytest.raises(ValueError, match="code values only"):
        capped_counts(DeletionRequest, "status", ["approved' OR '1'='1"], index_order=ORDER)
