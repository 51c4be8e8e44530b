"""Pure retirement policy as commented tables. No database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from core.errors import Refused
from retirements import policy
from retirements.policy import SlotView

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)


@pytest.mark.parametrize(
    ("never_activated", "disposable", "production", "policy_name", "wait"),
    [
        (False, False, False, "standard_30_days", timedelta(days=30)),  # the default
        (False, False, True, "standard_30_days", timedelta(days=30)),
        (True, False, False, "never_activated_1_day", DAY),  # never activated: one day
        (True, False, True, "never_activated_1_day", DAY),
        (False, True, False, "disposable_test", timedelta(seconds=600)),  # short policy outside production
        (True, True, False, "disposable_test", timedelta(seconds=600)),
    ],
)
def test_eligibility(never_activated, disposable, production, policy_name, wait) -> None:
    e = policy.eligibility(
        never_activated=never_activated,
        disposable=disposable,
        production=production,
        disposable_wait=timedelta(seconds=600),
        now=NOW,
    )
    assert (e.policy, e.eligible_at) == (policy_name, NOW + wait)


def test_disposable_marker_is_refused_in_production() -> None:
    with pytest.raises(Refused, match=r"disposable test workspaces cannot be retired .* in production"):
        policy.eligibility(
            never_activated=False, disposable=True, production=True, disposable_wait=timedelta(seconds=600), now=NOW
        )


@pytest.mark.parametrize(
    ("wait", "expected"),
    [
        # 30 days: received now, reminder at -7 d, final warning at -24 h
        (
            timedelta(days=30),
            [
                ("request_received", 0, True),
                ("reminder_7_days", 23 * 86400, False),
                ("final_warning", 29 * 86400, True),
            ],
        ),
        # 1 day: no reminder (it would fall before the request); final warning at request time
        (DAY, [("request_received", 0, True), ("final_warning", 0, True)]),
        # 10 minutes: the same shape as 1 day
        (timedelta(minutes=10), [("request_received", 0, True), ("final_warning", 0, True)]),
        # 8 days: reminder one day after the request
        (
            timedelta(days=8),
            [("request_received", 0, True), ("reminder_7_days", 86400, False), ("final_warning", 7 * 86400, True)],
        ),
    ],
)
def test_notice_plan(wait, expected) -> None:
    plan = policy.notice_plan(NOW, NOW + wait)
    assert [(p.kind, int((p.due_at - NOW).total_seconds()), p.gating) for p in plan] == expected


def test_next_wake_is_the_earliest_pending_notice_or_eligibility() -> None:
    eligible = NOW + 30 * DAY
    pending = [
        SlotView(1, "request_received", NOW, "delivered"),
        SlotView(2, "reminder_7_days", NOW + 23 * DAY, "pending"),
        SlotView(3, "final_warning", NOW + 29 * DAY, "pending", next_attempt_at=None),
    ]
    assert policy.next_wake(eligible_at=eligible, pending=pending, blocked_until=None) == NOW + 23 * DAY
    # a failed attempt waits for its retry time
    retry = [SlotView(2, "reminder_7_days", NOW, "pending", next_attempt_at=NOW + timedelta(minutes=2))]
    assert policy.next_wake(eligible_at=eligible, pending=retry, blocked_until=None) == NOW + timedelta(minutes=2)
    # a blocker pushes the boundary past eligibility
    assert policy.next_wake(eligible_at=eligible, pending=[], blocked_until=eligible + timedelta(hours=6)) == (
        eligible + timedelta(hours=6)
    )


def test_release_extends_eligibility_by_the_hold_and_replans_pending_notices() -> None:
    eligible = NOW + 30 * DAY
    slots = [
        SlotView(1, "request_received", NOW, "delivered", delivered_at=NOW),
        SlotView(2, "reminder_7_days", NOW + 23 * DAY, "pending"),
        SlotView(3, "final_warning", NOW + 29 * DAY, "pending"),
    ]
    plan = policy.replan_on_release(
        requested_at=NOW, eligible_at=eligible, held_for=5 * DAY, slots=slots, now=NOW + 6 * DAY
    )
    assert plan.eligible_at == eligible + 5 * DAY
    assert plan.moved == [(2, NOW + 28 * DAY), (3, NOW + 34 * DAY)]
    assert plan.added == [] and plan.suppressed == []


def test_a_reminder_whose_lead_no_longer_fits_is_suppressed_with_why_never_sent_late() -> None:
    """Held after the reminder was due and before it went out: on release its new time has passed,
    so it would go out saying "in 7 days" with less left. It is suppressed, with why."""
    slots = [
        SlotView(1, "request_received", NOW, "delivered", delivered_at=NOW),
        SlotView(2, "reminder_7_days", NOW + 23 * DAY, "pending"),
        SlotView(3, "final_warning", NOW + 29 * DAY, "pending"),
    ]
    held_at, released = NOW + 28 * DAY, NOW + 40 * DAY
    plan = policy.replan_on_release(
        requested_at=NOW, eligible_at=NOW + 30 * DAY, held_for=released - held_at, slots=slots, now=released
    )
    assert plan.eligible_at == NOW + 42 * DAY
    assert plan.suppressed == [2] and "less than the reminder's 7-day lead" in plan.why_suppressed[2]
    assert plan.moved == [(3, NOW + 41 * DAY)] and plan.added == []


def test_a_final_warning_that_named_the_old_date_is_planned_again_before_the_new_one() -> None:
    slots = [
        SlotView(1, "request_received", NOW, "delivered", delivered_at=NOW),
        SlotView(2, "reminder_7_days", NOW + 23 * DAY, "delivered", delivered_at=NOW + 23 * DAY),
        SlotView(3, "final_warning", NOW + 29 * DAY, "delivered", delivered_at=NOW + 29 * DAY),
    ]
    held_at, released = NOW + 29 * DAY + 12 * HOUR, NOW + 35 * DAY
    plan = policy.replan_on_release(
        requested_at=NOW, eligible_at=NOW + 30 * DAY, held_for=released - held_at, slots=slots, now=released
    )
    assert plan.eligible_at == NOW + 35 * DAY + 12 * HOUR
    assert [(p.kind, p.due_at, p.gating) for p in plan.added] == [("final_warning", released, True)]
    assert plan.moved == [] and plan.suppressed == []  # delivered notices are never moved
    # A hold short enough that the first warning still gave its full lead: not warned twice.
    short = policy.replan_on_release(
        requested_at=NOW, eligible_at=NOW + 30 * DAY, held_for=timedelta(seconds=30), slots=slots, now=released
    )
    assert short.added == []


def test_a_short_period_held_long_gets_no_reminder_in_the_past() -> None:
    eligible = NOW + DAY  # never activated: no reminder planned, the final warning at once
    slots = [
        SlotView(1, "request_received", NOW, "delivered", delivered_at=NOW),
        SlotView(2, "final_warning", NOW, "delivered", delivered_at=NOW),
    ]
    released = NOW + HOUR + 10 * DAY
    plan = policy.replan_on_release(
        requested_at=NOW, eligible_at=eligible, held_for=10 * DAY, slots=slots, now=released
    )
    assert plan.eligible_at == NOW + 11 * DAY
    assert [(p.kind, p.due_at) for p in plan.added] == [("final_warning", released)]


@pytest.mark.parametrize(
    ("left", "words"),
    [(7 * DAY, "in 7 days"), (6 * DAY + 2 * HOUR, "in 6 days"), (DAY, "in 1 day"), (HOUR, "today")],
)
def test_a_notice_says_how_long_is_left_as_it_is_when_it_goes_out(left, words) -> None:
    assert policy.days_until(NOW + left, NOW) == words


@pytest.mark.parametrize(
    ("attempts", "exhausted", "delay"),
    [
        (1, False, timedelta(minutes=1)),  # first failure: one minute
        (2, False, timedelta(minutes=2)),
        (5, False, timedelta(minutes=16)),
        (6, True, None),  # six attempts in all, then the alarm
    ],
)
def test_notice_retry(attempts, exhausted, delay) -> None:
    r = policy.notice_retry(attempts, NOW)
    assert r.exhausted is exhausted
    assert r.next_attempt_at == (NOW + delay if delay else None)


def facts(**overrides) -> policy.BoundaryFacts:
    base: dict[str, Any] = dict(
        now=NOW,
        request_status="waiting",
        eligible_at=NOW,
        watcher_is_authoritative=True,
        workspace_lifecycle="deletion_pending",
        legal_hold=False,
        protected_reason="",
        undelivered_gating=(),
        requester="hq-alice",
        requester_active=True,
        requester_staff=True,
        requester_permitted=True,
    )
    base.update(overrides)
    return policy.BoundaryFacts(**base)


@pytest.mark.parametrize(
    ("overrides", "action", "reason"),
    [
        ({}, "proceed", "all rechecks passed"),
        ({"watcher_is_authoritative": False}, "superseded", "superseded watcher woke"),
        ({"request_status": "held"}, "sleep", "on hold"),
        ({"request_status": "cancelled"}, "conclude", "request is cancelled"),
        ({"eligible_at": NOW + DAY}, "wait", "not yet eligible"),
        ({"workspace_lifecycle": "active"}, "close", "workspace is active"),
        ({"workspace_lifecycle": "deleted"}, "close", "workspace is deleted"),
        ({"legal_hold": True}, "close", "workspace has a legal hold"),
        ({"protected_reason": "key account"}, "close", "protected: key account"),
        ({"requester_staff": False}, "hold", "requester hq-alice is no longer staff"),
        ({"requester_active": False}, "hold", "is no longer active"),
        ({"requester_permitted": False}, "hold", "lacks the request_retirement permission"),
        ({"undelivered_gating": ("final_warning",)}, "wait", "gating notice(s) not delivered: final_warning"),
    ],
)
def test_point_of_no_return(overrides, action, reason) -> None:
    verdict = policy.point_of_no_return(facts(**overrides))
    assert verdict.action == action
    assert reason in verdict.reason


def test_gating_blocker_is_revisited_after_six_hours() -> None:
    verdict = policy.point_of_no_return(facts(undelivered_gating=("request_received",)))
    assert verdict.wake_at == NOW + timedelta(hours=6)


@pytest.mark.parametrize(
    ("status", "started", "created_ago", "wake_ago", "alive_for", "stalled"),
    [
        ("pending", False, timedelta(minutes=16), None, None, "never started"),
        ("pending", False, timedelta(minutes=14), None, None, None),
        ("running", True, DAY, timedelta(minutes=16), None, "missed its wake-up"),
        ("running", True, DAY, timedelta(minutes=16), -timedelta(seconds=1), "missed its wake-up"),
        # A wake-up missed long ago, but the watcher beat or holds a claim now: it may be mid-send.
        ("running", True, DAY, timedelta(hours=3), timedelta(seconds=1), None),
        ("running", True, DAY, timedelta(minutes=14), None, None),
        ("running", True, DAY, -DAY, None, None),  # waiting for a wake-up in the future
        # The request's current watcher concluded nothing while the request waits: stalled.
        ("superseded", True, DAY, timedelta(days=3), None, "superseded without concluding the request"),
        ("settled", True, DAY, -DAY, DAY, "settled without concluding the request"),
    ],
)
def test_stall_detection(status, started, created_ago, wake_ago, alive_for, stalled) -> None:
    why = policy.is_stalled(
        watcher_status=status,
        watcher_started=started,
        created_at=NOW - created_ago,
        next_wake_at=NOW - wake_ago if wake_ago is not None else None,
        alive_until=NOW + alive_for if alive_for is not None else None,
        now=NOW,
    )
    assert (why is None) if stalled is None else (why is not None and stalled in why)


def test_the_first_rules_read_from_the_request_alone_are_the_verdict_whenever_they_speak() -> None:
    """`first_verdict` reads the request alone; over every combination of the request's facts
    and of everything else the boundary reads, when it speaks it is the whole verdict, and when
    it does not the verdict comes from the rest."""
    seen = set()
    for status in ("waiting", "held", "executing", "cancelled"):
        for authoritative in (True, False):
            for eligible in (NOW - timedelta(seconds=1), NOW, NOW + timedelta(seconds=1)):
                for others in (
                    {},
                    {"legal_hold": True},
                    {"workspace_lifecycle": "active"},
                    {"requester_permitted": False},
                    {"undelivered_gating": ("final_warning",)},
                ):
                    f = facts(
                        request_status=status, watcher_is_authoritative=authoritative, eligible_at=eligible, **others
                    )
                    verdict = policy.point_of_no_return(f)
                    first = policy.first_verdict(
                        request_status=status, watcher_is_authoritative=authoritative, now=NOW, eligible_at=eligible
                    )
                    if first is not None:
                        assert first == verdict, f
                    else:
                        assert verdict.action in (policy.PROCEED, policy.CLOSE, policy.HOLD, policy.WAIT), f
                        assert verdict.reason != policy.NOT_YET_ELIGIBLE, f
                    seen.add(first.action if first else None)
    assert seen == {None, policy.SUPERSEDED, policy.SLEEP, policy.CONCLUDE, policy.WAIT}


@pytest.mark.parametrize(
    ("wait", "warned_late_by", "moved_by"),
    [
        (timedelta(days=30), timedelta(0), timedelta(0)),  # on time: nothing moves
        (timedelta(days=30), timedelta(seconds=50), timedelta(0)),  # within the watcher's tick
        (timedelta(days=30), timedelta(hours=3), timedelta(hours=3)),  # 3 h late: eligibility 3 h later
        (timedelta(days=30), timedelta(days=2), timedelta(days=2)),  # sent after eligibility: 24 h from then
        (timedelta(days=1), timedelta(hours=5), timedelta(hours=5)),  # never activated: the day holds in full
        (timedelta(minutes=10), timedelta(minutes=30), timedelta(minutes=30)),  # disposable: its 10 min hold
    ],
)
def test_a_late_final_warning_moves_eligibility_so_its_lead_holds(wait, warned_late_by, moved_by) -> None:
    requested = NOW - 40 * DAY
    eligible = requested + wait
    planned = next(p.due_at for p in policy.notice_plan(requested, eligible) if p.kind == policy.FINAL_WARNING)
    got = policy.eligible_after_warning(
        eligible_at=eligible, warned_at=planned + warned_late_by, requested_at=requested
    )
    assert got == eligible + moved_by
    assert got - (planned + warned_late_by) >= min(policy.FINAL_WARNING_LEAD, wait) - policy.WARNING_ON_TIME
