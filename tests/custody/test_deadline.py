"""The legal deadline: due one calendar month after receipt, extendable with a reason up to three
months after receipt, shown as days left; refused beyond the maximum with nothing written."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.urls import reverse

from core.authority import named
from core.errors import BadInput, Refused
from deletions import case
from deletions.models import DeletionRequest
from deletions.rules import custody
from deletions.services import deletion_extend_deadline, deletion_submit
from tests.deletions.helpers import all_rows

T = datetime(2027, 1, 31, 9, 30, tzinfo=UTC)


def test_a_month_is_a_calendar_month_ending_on_the_months_last_day() -> None:
    assert custody.due(T, 1) == datetime(2027, 2, 28, 9, 30, tzinfo=UTC)
    assert custody.due(datetime(2028, 1, 31, tzinfo=UTC), 1) == datetime(2028, 2, 29, tzinfo=UTC)
    assert custody.due(datetime(2027, 11, 15, tzinfo=UTC), 3) == datetime(2028, 2, 15, tzinfo=UTC)


@pytest.mark.django_db
def test_the_deadline_runs_from_receipt_and_is_extended_within_the_legal_maximum(cmd) -> None:
    with time_machine.travel(T, tick=False):
        received = T - timedelta(days=10)  # the intake received it ten days before it was submitted
        req = deletion_submit(target="demo:gdpr", actor=named("operator-a"), received_at=received)
        assert (req.received_at, req.due_at) == (received, datetime(2027, 2, 21, 9, 30, tzinfo=UTC))
        assert case.days_left(req, T) == 21 and case.deadline_words(req, T).startswith("21 days left")
        with pytest.raises(Refused, match="in the future"):
            deletion_submit(target="demo:later", actor=named("operator-a"), received_at=T + timedelta(hours=1))
        before = all_rows()
        limit = datetime(2027, 4, 21, 9, 30, tzinfo=UTC)  # three months after receipt
        with pytest.raises(Refused, match=r"at most 3 months after receipt \(2027-04-21 09:30:00 UTC\)"):
            deletion_extend_deadline(
                actor=named("operator-b"), request_id=req.id, until=limit + timedelta(seconds=1), reason="complex"
            )
        with pytest.raises(Refused, match="later than"):
            deletion_extend_deadline(actor=named("operator-b"), request_id=req.id, until=req.due_at, reason="x")
        with pytest.raises(BadInput, match="reason"):
            deletion_extend_deadline(actor=named("operator-b"), request_id=req.id, until=limit, reason=" ")
        assert all_rows() == before  # refused: nothing written
        deletion_extend_deadline(actor=named("operator-b"), request_id=req.id, until=limit, reason="twelve systems")
        req = DeletionRequest.objects.get(id=req.id)
        assert req.due_at == limit
        said = req.decisions.get(action="extend_deadline")
        assert said.actor_label == "operator-b" and said.reason.endswith("twelve systems")
        shown = json.loads(cmd("show_deletion", str(req.id), "--json").out)
        assert shown["due_at"] == limit.isoformat() and shown["days_left"] == 80
    with time_machine.travel(limit + timedelta(days=2), tick=False):
        assert case.days_left(req, limit + timedelta(days=2)) == -2
        assert case.deadline_words(req, limit + timedelta(days=2)).startswith("deadline passed 2 d")


@pytest.mark.django_db
def test_the_list_shows_days_left_sorts_and_filters_by_deadline(client) -> None:
    from django.contrib.auth.models import User

    with time_machine.travel(T, tick=False):
        soon = deletion_submit(target="demo:soon", actor=named("operator-a"), received_at=T - timedelta(days=25))
        late = deletion_submit(target="demo:late", actor=named("operator-a"), received_at=T - timedelta(days=40))
        fresh = deletion_submit(target="demo:fresh", actor=named("operator-a"))
        client.force_login(User.objects.get(username="operator-a"))
        listing = reverse("admin:deletions_deletionrequest_changelist")

        def targets(**query: str) -> list[str]:
            page = client.get(listing, query).content.decode()
            found = [(page.find(f"demo:{t}<"), t) for t in ("soon", "late", "fresh")]
            return [t for at, t in sorted(found) if at >= 0]

        assert targets(deadline="passed") == ["late"]
        assert targets(deadline="soon") == ["soon"]
        assert targets(deadline="later") == ["fresh"]
        assert targets(o="5") == ["late", "soon", "fresh"]  # the deadline column, soonest first
        assert targets(o="-5") == ["fresh", "soon", "late"]
        page = client.get(listing).content.decode()
        assert "passed, 9 d late" in page and "6 d left" in page and "28 d left" in page
        assert DeletionRequest.objects.get(id=soon.id).due_at < DeletionRequest.objects.get(id=fresh.id).due_at
        assert late.due_at < T
