"""The overview's counts by state are the tallies the database keeps where each change happens:
exact at any size, and the same few statements however big the tables grow."""

from __future__ import annotations

import pytest

from core import clock
from core.authority import named
from deletions.models import DeletionRequest, Status
from deletions.services import deletion_cancel
from ops.overview import overview
from tests.conftest import submit_and_approve
from tests.support import clone_rows

pytestmark = pytest.mark.django_db


def test_the_overview_counts_every_state_exactly_from_the_tallies() -> None:
    cases = [submit_and_approve(f"demo:count-{n}") for n in range(4)]
    deletion_cancel(actor=named("operator-a"), request_id=cases[0].id, reason="asked twice")
    template = DeletionRequest.objects.get(target="demo:count-1")
    made = {"id": "gen_random_uuid()", "target": "t.target || '-' || g"}
    clone_rows("entity_deletion_requests", "t.id = %s", 10_001, made, [template.id])  # past the old 10,000 cap
    counts = {value: shown for _, shown, value in overview(clock.now())["deletion_counts"]}
    assert counts["cancelled"] == "1" and counts["completed"] == "0"
    for status in Status.values:
        assert int(counts[status].replace(",", "")) == DeletionRequest.objects.filter(status=status).count(), status
