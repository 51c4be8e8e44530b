"""The retirement timeline's layout: no two label boxes meet, whatever the dates. Pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from retirements import case

START = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def boxes(t: case.Timeline) -> list[tuple[int, int, int, int]]:
    labels = [m.label for m in t.marks] + [h.label for h in t.holds]
    return [(lb.x, lb.y - 13, lb.x + lb.width, lb.y + 3) for lb in labels]


def meet(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def request(status: str = "waiting", eligible_days: float = 30) -> SimpleNamespace:
    return SimpleNamespace(requested_at=START, eligible_at=START + timedelta(days=eligible_days), status=status)


def notice(kind: str, due: timedelta, status: str = "pending") -> SimpleNamespace:
    return SimpleNamespace(kind=kind, due_at=START + due, delivered_at=None, status=status, moved_because="")


def decision(action: str, at: timedelta) -> SimpleNamespace:
    return SimpleNamespace(action=action, created_at=START + at)


def test_a_completed_request_lays_every_label_apart() -> None:
    """Everything happened within seconds: the labels used to pile on one spot."""
    notices = [notice(k, timedelta(seconds=i), "delivered") for i, k in enumerate(["request_received", "final"])]
    decisions = [
        decision(a, timedelta(seconds=2 + i)) for i, a in enumerate(["hold", "release", "point_of_no_return", "purged"])
    ]
    for width in (800, 360):
        t = case.timeline(request("completed", 0), notices, decisions, START + timedelta(seconds=9), width=width)
        placed = boxes(t)
        assert all(not meet(a, b) for i, a in enumerate(placed) for b in placed[i + 1 :])
        assert all(b[0] >= 0 and b[2] <= width for b in placed)  # inside the picture


def test_the_point_of_no_return_is_drawn_ahead_of_time_with_a_date_axis() -> None:
    t = case.timeline(request(), [notice("request_received", timedelta(0))], [], START + timedelta(days=2))
    planned = [m for m in t.marks if m.kind == "eligible"]
    assert planned[0].planned and "point of no return (planned)" in planned[0].label.text
    assert len(t.ticks) >= 3 and t.ticks[0].text.startswith("Nov")


def test_an_open_hold_is_a_span_up_to_now() -> None:
    now = START + timedelta(days=3)
    t = case.timeline(request("held"), [], [decision("hold", timedelta(days=1))], now)
    assert len(t.holds) == 1 and t.holds[0].label.text == "on hold" and t.holds[0].x2 > t.holds[0].x1


@settings(max_examples=60, deadline=None)
@given(
    offsets=st.lists(st.integers(min_value=0, max_value=40 * 86400), min_size=1, max_size=8),
    actions=st.lists(st.sampled_from(["hold", "release", "cancel", "point_of_no_return"]), max_size=4),
    width=st.sampled_from([800, 360]),
)
def test_no_two_labels_ever_meet(offsets, actions, width) -> None:
    notices = [notice(f"notice_{i}", timedelta(seconds=o)) for i, o in enumerate(offsets)]
    decisions = [decision(a, timedelta(seconds=offsets[i % len(offsets)])) for i, a in enumerate(actions)]
    t = case.timeline(request(), notices, decisions, START + timedelta(days=5), width=width)
    placed = boxes(t)
    assert all(not meet(a, b) for i, a in enumerate(placed) for b in placed[i + 1 :])
