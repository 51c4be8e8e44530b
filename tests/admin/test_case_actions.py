"""Which actions a case page offers, and why the others are disabled, by state and permission. Pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from core import present
from deletions import case as deletion_case
from retirements import case as retirement_case
from retirements import policy as retirement_policy

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


NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
LIVE = NOW + timedelta(seconds=30)
GONE = NOW - timedelta(seconds=1)


def deletion(status: str, **facts) -> SimpleNamespace:
    base = dict(
        status=status,
        cancel_requested_at=None,
        cancel_requested_by="",
        lease_owner=None,
        lease_expires_at=None,
        lease_generation=3,
        next_attempt_at=None,
    )
    return SimpleNamespace(**{**base, **facts})


def shown(offers) -> dict[str, str]:
    """name → "" when offered, else the reason it is disabled."""
    return {o.name: o.why_not for o in offers}


DELETION_ACTIONS = {"approve", "settle", "resume", "run", "revoke", "cancel", "close-alarm"}


@pytest.mark.parametrize(
    ("status", "enabled"),
    [
        ("submitted", {"approve", "cancel"}),
        ("approved", {"run", "revoke", "cancel"}),
        ("running", {"run", "revoke", "cancel"}),
        ("retry_wait", {"run", "revoke", "cancel"}),
        ("needs_attention", {"resume", "revoke", "cancel"}),
        ("needs_review", {"approve", "cancel"}),  # refused at the boundary: approve again or cancel
        ("completed", set()),
        ("cancelled", set()),
    ],
)
def test_every_deletion_action_shows_offered_or_disabled_with_the_reason(status, enabled) -> None:
    got = shown(deletion_case.actions(deletion(status), ALL_DELETION, now=NOW, submitter=False, effect_unknown=False))
    assert set(got) == DELETION_ACTIONS  # none hidden
    assert {name for name, why in got.items() if not why} == enabled
    assert all(why for name, why in got.items() if name not in enabled)
    # Without permissions the same actions show, each disabled with the permission it needs.
    bare = shown(deletion_case.actions(deletion(status), set(), now=NOW, submitter=False, effect_unknown=False))
    assert set(bare) == DELETION_ACTIONS and all(
        why.startswith("only staff allowed to ") and "deletion" in why for why in bare.values()
    )


def test_a_closed_deletion_says_why_each_action_is_disabled() -> None:
    got = shown(deletion_case.actions(deletion("completed"), ALL_DELETION, now=NOW, submitter=False,
                                      effect_unknown=False))  # fmt: skip
    assert got == {
        "approve": "the request is completed: only a request waiting for approval is approved",
        "settle": "no stage's effect is in question: nothing to confirm",
        "resume": "only a request that needs attention is taken up again",
        "run": "the request is completed: nothing to run",
        "revoke": "the request is completed: no current approval to revoke",
        "cancel": "the request is already completed",
        "close-alarm": "no integrity or applied-after-withdrawal alarm is open on this case",
    }


def test_an_open_fault_disables_approve_and_resume_and_offers_closing_it() -> None:
    """As the services refuse: an open fault stops approval and resume; an effect applied by hand after
    withdrawal stops them for good, its alarm closed or not; closing is offered while one is open."""
    review = shown(deletion_case.actions(deletion("needs_review"), ALL_DELETION, now=NOW, submitter=False,
                                         effect_unknown=False, open_faults={"integrity_fault"}))  # fmt: skip
    assert review["approve"].startswith("an integrity fault is open on this case, so it cannot be approved")
    assert review["close-alarm"] == ""
    held = shown(deletion_case.actions(deletion("needs_attention"), ALL_DELETION, now=NOW, submitter=False,
                                       effect_unknown=False, by_hand=True, applied_after=True))  # fmt: skip
    assert "applied by hand after the approval was withdrawn, so the case cannot be recorded" in held["record"]
    assert held["close-alarm"] == "no integrity or applied-after-withdrawal alarm is open on this case"
    assert held["correct"] == "no effect was recorded by hand on this case: nothing to correct"


@pytest.mark.parametrize(
    ("req", "submitter", "effect_unknown", "name", "why"),
    [
        (
            deletion("submitted"),
            True,
            False,
            "approve",
            "you submitted this request: an approver (not you) must approve it",
        ),
        (
            deletion("running", lease_owner="q:vm:14628", lease_expires_at=NOW + timedelta(minutes=2, seconds=11)),
            False,
            False,
            "run",
            "a worker on host vm (process 14628) holds the lease until 2026-11-30 12:02:11 UTC",
        ),
        (
            deletion("retry_wait", next_attempt_at=NOW + timedelta(seconds=22, milliseconds=300)),
            False,
            False,
            "run",
            "the retry is not due for 23 s",
        ),
        (deletion("retry_wait", next_attempt_at=GONE), False, False, "run", ""),
        (
            deletion("running", cancel_requested_at=NOW, cancel_requested_by="operator-c"),
            False,
            False,
            "run",
            "cancellation was recorded by operator-c",
        ),
        (
            deletion("running", cancel_requested_at=NOW, cancel_requested_by="operator-c"),
            False,
            False,
            "cancel",
            "cancellation already recorded by operator-c",
        ),
        (deletion("retry_wait"), False, True, "settle", ""),  # effect unknown: confirm not applied
    ],
)
def test_deletion_action_disabled_with_the_reason(req, submitter, effect_unknown, name, why) -> None:
    got = shown(deletion_case.actions(req, ALL_DELETION, now=NOW, submitter=submitter, effect_unknown=effect_unknown))
    assert got[name] == why


def test_settling_an_unknown_effect_is_offered_only_while_it_is_unknown() -> None:
    assert (
        shown(
            deletion_case.actions(deletion("retry_wait"), ALL_DELETION, now=NOW, submitter=False, effect_unknown=False)
        )["settle"]
        == "no stage's effect is in question: nothing to confirm"
    )


def watched(status: str, watcher_status: str = "running", next_wake=None) -> SimpleNamespace:
    return SimpleNamespace(
        status=status, next_wake_at=next_wake, watcher=SimpleNamespace(status=watcher_status, heartbeat_at=None)
    )


HEALTHY = "the watcher is healthy: it is starting; " + retirement_policy.RESUME_RULE
ASLEEP = "the watcher sleeps while the request is on hold (releasing wakes it); " + retirement_policy.RESUME_RULE


RETIREMENT_ACTIONS = {
    "hold", "release", "retry-notices", "retry-purge", "close-refused", "resume", "cancel", "close-alarm",
}  # fmt: skip


@pytest.mark.parametrize(
    ("status", "enabled"),
    [
        ("waiting", {"hold", "cancel"}),
        ("held", {"release", "cancel"}),
        ("executing", set()),
        ("completed", set()),
        ("cancelled", set()),
        ("closed", set()),
    ],
)
def test_every_retirement_action_shows_offered_or_disabled_with_the_reason(status, enabled) -> None:
    got = shown(retirement_case.actions(watched(status), ALL_RETIREMENT, failed_notices=False, now=NOW))
    assert set(got) == RETIREMENT_ACTIONS and {n for n, why in got.items() if not why} == enabled
    assert all(why for n, why in got.items() if n not in enabled)
    if status in ("waiting", "held"):
        assert got["resume"] == (HEALTHY if status == "waiting" else ASLEEP)
    bare = shown(retirement_case.actions(watched(status), set(), failed_notices=False, now=NOW))
    assert set(bare) == RETIREMENT_ACTIONS and all(why.startswith("only staff allowed to ") for why in bare.values())


def test_a_refused_purge_offers_retry_and_close_and_nothing_else() -> None:
    got = shown(retirement_case.actions(watched("executing"), ALL_RETIREMENT, failed_notices=False, now=NOW,
                                        purge_refused=True))  # fmt: skip
    assert {n for n, why in got.items() if not why} == {"retry-purge", "close-refused"}
    assert got["cancel"] == got["hold"] == "past the point of no return"


@pytest.mark.parametrize("status", ["executing", "completed"])
def test_close_alarm_is_offered_only_while_an_alarm_no_move_answers_is_open(status) -> None:
    def close_alarm(*open_alarms: str) -> str:
        got = shown(retirement_case.actions(watched(status), ALL_RETIREMENT, failed_notices=False, now=NOW,
                                            open_alarms=open_alarms))  # fmt: skip
        return got["close-alarm"]

    assert close_alarm("purge_stale_executor") == close_alarm("purge_stale_executor", "purge_refused") == ""
    nothing = "no alarm that only a person closes (purge stale executor) is open: nothing to close"
    assert close_alarm() == close_alarm("purge_refused", "watcher_stalled") == nothing


def test_resume_watcher_is_offered_only_for_a_stalled_or_settled_watcher() -> None:
    """A watcher asleep until a wake-up weeks away still runs: resume is disabled with its next wake-up."""
    weeks = watched("waiting", next_wake=NOW + timedelta(days=20))
    got = shown(retirement_case.actions(weeks, ALL_RETIREMENT, failed_notices=False, now=NOW))
    assert got["resume"] == (
        "the watcher is healthy: its next wake-up is 2026-12-20 12:00:00 UTC (in 20 d); "
        + retirement_policy.RESUME_RULE
    )
    missed = "watcher missed its wake-up at 2026-11-30 11:40:00 UTC by more than 15 minutes"
    late = shown(retirement_case.actions(weeks, ALL_RETIREMENT, failed_notices=False, now=NOW, stalled=missed))
    assert late["resume"] == ""
    settled = watched("held", watcher_status="settled")
    assert shown(retirement_case.actions(settled, ALL_RETIREMENT, failed_notices=False, now=NOW))["resume"] == ""


@pytest.mark.parametrize(
    ("status", "lease", "open_question", "owner", "expected"),
    [
        # Waiting for approval: the approvers, never the submitter.
        ("submitted", None, "waiting for an approver (not the submitter)", "operator-a", "approvers (group)"),
        # Refused at the boundary: back to the approvers.
        ("needs_review", None, "approval expired", "approvers", "approvers (group)"),
        # A worker holds a live lease: the system, named by executor and generation.
        ("running", LIVE, "", "approver-1", "the system (worker on host vm (process 14628), heartbeat 11:59:50)"),
        ("approved", LIVE, "", "approver-1", "the system (worker on host vm (process 14628), heartbeat 11:59:50)"),
        ("approved", None, "", "approver-1", "system: the next worker (dispatcher)"),
        # No live lease and nothing submitted unsettled: queued for the next free worker, the system's.
        ("running", GONE, "", "approver-1", "system: the next free worker (queued)"),
        ("running", None, "", "approver-1", "system: the next free worker (queued)"),
        ("retry_wait", None, "", "operator-a", "system: retry at the next attempt"),
        # Effect unknown and needs attention: a named owner, else the operators on call.
        ("retry_wait", None, "did operation X take effect?", "operator-c", "operator-c"),
        ("retry_wait", None, "did operation X take effect?", "operator-a", "operators on call (group)"),
        ("needs_attention", None, "failed 10 times", "", "operators on call (group)"),
        ("needs_attention", None, "failed 10 times", "operators on call", "operators on call (group)"),
        ("needs_attention", None, "failed 10 times", "operator-c", "operator-c"),  # resumed by operator-c before
        ("retry_wait", None, "did operation X take effect?", "system", "operators on call (group)"),
        ("completed", None, "", "approver-1", "-"),
        ("cancelled", None, "", "approver-1", "-"),
    ],
)
def test_the_responsible_person_follows_the_case(status, lease, open_question, owner, expected) -> None:
    req = SimpleNamespace(
        status=status,
        lease_owner="q:vm:14628" if lease else None,
        lease_expires_at=lease,
        heartbeat_at=NOW - timedelta(seconds=10),
        lease_generation=3,
        open_question=open_question,
        owner=owner,
        requested_by="operator-a",
    )
    assert deletion_case.responsible(req, NOW) == expected


def case_row(status: str, lease=None, **facts) -> SimpleNamespace:
    return SimpleNamespace(**{
        "status": status, "lease_owner": "q:vm:14628" if lease else None, "lease_expires_at": lease,
        "lease_generation": 3, "heartbeat_at": NOW - timedelta(seconds=4), "open_question": "", "owner": "system",
        "requested_by": "operator-a", "cancel_requested_at": None, "next_check_at": None, "next_attempt_at": None,
        "updated_at": NOW - timedelta(minutes=3, seconds=5), "assigned_for": "", "assignee_id": None,
        "backup_id": None, "due_at": NOW + timedelta(days=20), "completed_at": None, **facts,
    })  # fmt: skip


@pytest.mark.parametrize(
    ("row", "unsettled", "question", "overdue"),
    [
        # A stage running with a live lease, its saved next check long past: never overdue.
        (case_row("running", LIVE, next_check_at=NOW - timedelta(minutes=9)), False, "", False),
        # Between two stages, no worker free yet: queued, with its wait; never "effect unknown".
        (case_row("running", None), False, "queued, waiting for a free worker (for 3 min 5 s)", False),
        # Its worker's lease lapsed a second ago (nothing submitted): waiting since the lapse.
        (case_row("running", GONE), False, "queued, waiting for a free worker (for 1 s)", False),
        (
            case_row("approved", None, updated_at=NOW - timedelta(seconds=40)),
            False,
            "queued, waiting for a free worker (for 40 s)",
            False,
        ),
        # A plain retry that is due waits for a worker too.
        (
            case_row("retry_wait", next_attempt_at=NOW - timedelta(seconds=20), updated_at=NOW - timedelta(minutes=5)),
            False,
            "queued, waiting for a free worker (for 20 s)",
            False,
        ),
        # A retry not yet due: nothing asked, the system's time.
        (case_row("retry_wait", next_attempt_at=LIVE), False, "", False),
        # Submitted and not settled, its worker gone: effect unknown, and the next check is owed.
        (
            case_row("running", GONE, next_check_at=NOW - timedelta(minutes=5)),
            True,
            "not reporting since 2026-11-30 11:59:56 UTC: the worker stopped after submitting the current stage's "
            "operation; its effect is unknown until the next worker looks it up at the target",
            True,
        ),
        # A saved question (effect unknown in retry_wait, needs review) is shown as saved.
        (
            case_row("needs_review", open_question="approval revoked", next_check_at=NOW + timedelta(hours=23)),
            False,
            "approval revoked",
            False,
        ),
        (
            case_row("needs_attention", open_question="failed 10 times", next_check_at=NOW - timedelta(minutes=3)),
            False,
            "failed 10 times",
            True,
        ),
        (case_row("completed"), False, "", False),
    ],
)
def test_the_state_words_follow_one_rule(row, unsettled, question, overdue) -> None:
    """The panel's open question and the list's overdue mark, per state, from the same facts."""
    assert deletion_case.open_question(row, NOW, unsettled) == question
    assert deletion_case.overdue(row, NOW, unsettled) is overdue
    assert deletion_case.queued(row, NOW, unsettled) is question.startswith("queued")
    req = SimpleNamespace(**vars(row), inventory_json={}, last_action="", target="u")
    panel = deletion_case.panel(deletion_case.story(req, NOW, unsettled), req)
    assert panel.open_question == question and panel.owner.endswith("(next check overdue)") is overdue


def test_a_worker_lost_after_submitting_is_the_operators_on_call() -> None:
    """Only a submitted, unsettled effect is "effect unknown"; a queued case is not."""
    req = case_row("running", GONE)
    assert deletion_case.responsible(req, NOW, unsettled=True) == "operators on call (group)"
    assert deletion_case.responsible(req, NOW) == "system: the next free worker (queued)"


def test_a_case_a_worker_holds_is_next_checked_at_its_lease() -> None:
    held = case_row("running", LIVE, next_check_at=NOW - timedelta(minutes=9))
    assert deletion_case.next_check(held, NOW) == LIVE
    assert deletion_case.next_check(case_row("completed"), NOW) is None


def test_a_case_back_in_review_gives_the_approvers_a_working_day() -> None:
    from deletions.rules import custody

    for held in (
        custody.refused_at_boundary(rule="approval revoked", now=NOW),
        custody.revoked(approver="a", by="b", reason="r", now=NOW),
        custody.expired(approver="a", expires_at=NOW, now=NOW),
    ):
        assert held.next_check_at == NOW + timedelta(hours=24)


def test_an_overdue_next_check_is_marked() -> None:
    assert deletion_case.overdue(case_row("needs_attention", next_check_at=NOW - timedelta(minutes=5)), NOW) is True
    assert deletion_case.overdue(case_row("completed", next_check_at=GONE), NOW) is False
    assert deletion_case.overdue(case_row("needs_attention", next_check_at=LIVE), NOW) is False
    # Within the dispatcher's cycle (one minute, two of grace) a due check is not yet overdue.
    assert deletion_case.overdue(case_row("needs_review", next_check_at=NOW - timedelta(seconds=90)), NOW) is False


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
    got = shown(retirement_case.actions(watched(status), ALL_RETIREMENT, failed_notices=failed_notices, now=NOW))
    assert (got.get("retry-notices") == "") is offered


def test_the_timeline_folds_routine_lease_lines_and_shows_failures() -> None:
    def event(minute: int, kind: str, generation: int, previous: str = "") -> SimpleNamespace:
        return SimpleNamespace(at=NOW + timedelta(minutes=minute), event=kind, owner="q:vm:7", generation=generation,
                               previous_owner=previous)  # fmt: skip

    events = [event(1, "claim", 1), event(2, "release", 1), event(3, "claim", 2), event(4, "release", 2),
              event(6, "takeover", 3, previous="q:vm:6"), event(7, "release", 3)]  # fmt: skip
    failed = SimpleNamespace(
        outcome="failed",
        finished_at=NOW + timedelta(minutes=5),
        started_at=NOW,
        executor="q:vm:7",
        error="RuntimeError: disk full",
        stage=SimpleNamespace(stage="purge_db"),
    )
    decision = SimpleNamespace(created_at=NOW, actor_label="approver-1", action="approve", reason="", actor_id=3)
    lines = [(m.who, m.what, m.kind) for m in deletion_case.timeline([decision], events, [failed])]
    assert lines == [
        ("approver-1", "approve", "staff"),
        ("workers", "claimed and released the lease 2 times", "routine"),
        ("worker on host vm (process 7)", "stage failed: purge db", "failure"),
        ("worker on host vm (process 7)", "took over an expired lease", "worker"),
        ("worker on host vm (process 7)", "released the lease", "worker"),
    ]


def test_what_happened_at_one_instant_reads_in_the_order_it_happened() -> None:
    """Under a frozen clock (the demo's) the decision, the claim, the failure and the release share
    one timestamp: the failure never reads before the claim that led to it."""
    events = [SimpleNamespace(at=NOW, event=kind, owner="q:vm:7", generation=1, previous_owner="")
              for kind in ("release", "claim")]  # fmt: skip
    failed = SimpleNamespace(outcome="failed", finished_at=NOW, started_at=NOW, executor="q:vm:7", error="boom",
                             stage=SimpleNamespace(stage="purge_db"))  # fmt: skip
    decision = SimpleNamespace(created_at=NOW, actor_label="approver-1", action="approve", reason="", actor_id=3)
    lines = [m.what for m in deletion_case.timeline([decision], events, [failed])]
    assert lines == ["approve", "claimed the lease", "stage failed: purge db", "released the lease"]


def test_the_same_failure_on_every_retry_is_said_once() -> None:
    """A stage failing the same way under three leases reads as one line with the error once; a
    different error after it stands on its own."""
    events = [SimpleNamespace(at=NOW + timedelta(minutes=m), event=kind, owner="q:vm:7", generation=g,
                              previous_owner="")
              for g, m in ((1, 0), (2, 1), (3, 2), (4, 3)) for kind in ("claim", "release")]  # fmt: skip

    def failed(minute: int, error: str) -> SimpleNamespace:
        return SimpleNamespace(outcome="failed", finished_at=NOW + timedelta(minutes=minute), started_at=NOW,
                               executor="q:vm:7", error=error, stage=SimpleNamespace(stage="purge_db"))  # fmt: skip

    attempts = [failed(0, "disk full"), failed(1, "disk full"), failed(2, "disk full"), failed(3, "timeout")]
    lines = [(m.what, m.why) for m in deletion_case.timeline([], events, attempts)]
    last = present.absolute(NOW + timedelta(minutes=2))
    assert lines == [
        ("claimed the lease", "lease #1"),
        ("stage failed: purge db, 3 times in a row", f"disk full (leases #1 to #3, the last {last})"),
        ("released the lease", "lease #3"),
        ("claimed the lease", "lease #4"),
        ("stage failed: purge db", "timeout"),
        ("released the lease", "lease #4"),
    ]


def test_a_live_lease_whose_heartbeat_is_late_says_so(settings) -> None:
    """A 60 s lease beats every 10 s; 40 s without a beat (a paused or stuck worker) reads late."""
    settings.DELETION_HEARTBEAT_SECONDS = 10
    beat = NOW - timedelta(seconds=40)
    late = case_row("running", beat + timedelta(seconds=60), heartbeat_at=beat)
    assert deletion_case.heartbeat_late(late, NOW) is True
    assert deletion_case.responsible(late, NOW) == (
        "the system (worker on host vm (process 14628), not reporting since 11:59:20)"
    )
    asked = deletion_case.open_question(late, NOW)  # where the lateness and the lease's end are said, once
    assert asked.startswith("not reporting since 2026-11-30 11:59:20 UTC") and "12:00:20" in asked
    fresh = case_row("running", NOW + timedelta(seconds=55), heartbeat_at=NOW - timedelta(seconds=5))
    assert deletion_case.heartbeat_late(fresh, NOW) is False and "late" not in deletion_case.responsible(fresh, NOW)


def test_a_worker_late_with_its_heartbeat_is_an_open_question_saying_who_acts_if_it_never_reports(settings) -> None:
    """Three heartbeats without a beat, nothing submitted: the case asks, and says another worker takes over."""
    settings.DELETION_HEARTBEAT_SECONDS = 10
    lease_end = NOW + timedelta(minutes=10)
    late = SimpleNamespace(
        status="running",
        lease_owner="q:vm:14628",
        lease_expires_at=lease_end,
        heartbeat_at=NOW - timedelta(minutes=14),  # the lease is 24 min from the last beat: 14 > 12
        open_question="",
        cancel_requested_at=None,
    )
    asked = deletion_case.open_question(late, NOW)
    assert asked.startswith("not reporting since 2026-11-30 11:46:00 UTC: the worker on host vm (process 14628)")
    assert "another worker takes over and goes on from the saved stage" in asked
    on_time = SimpleNamespace(**{**vars(late), "heartbeat_at": NOW - timedelta(seconds=10)})
    assert deletion_case.open_question(on_time, NOW) == ""


@pytest.mark.parametrize(("silent_for", "reporting"), [(29, True), (30, False), (180, False)])
def test_a_worker_silent_for_three_heartbeats_is_not_reporting_and_its_submitted_effect_unknown(
    settings, silent_for, reporting
) -> None:
    """Heartbeats every 10 s: a worker silent for 30 s is "not reporting since" its last beat, its
    submitted effect unknown and the operators on call's, though its lease (15 min, as the demo's
    grace) runs for minutes more; at 29 s it is still the system's, running."""
    settings.DELETION_HEARTBEAT_SECONDS = 10
    beat = NOW - timedelta(seconds=silent_for)
    row = case_row("running", beat + timedelta(minutes=15), heartbeat_at=beat, next_check_at=NOW - timedelta(hours=1))
    req = SimpleNamespace(**vars(row), inventory_json={}, last_action="", target="u")
    told = deletion_case.story(req, NOW, True)
    if reporting:
        assert told.status_words == "running" and told.question == "" and told.owner.startswith("the system (")
        assert deletion_case.effect_unknown(req, NOW, True) is False
        return
    since = present.absolute(beat)
    assert told.status_words == "effect unknown" and deletion_case.effect_unknown(req, NOW, True) is True
    assert told.question.startswith(f"not reporting since {since}: ") and "looks the operation up" in told.question
    assert told.owner == "operators on call (group): nobody named yet" and told.rota == "operators on call"
    assert told.next_check_at == beat + timedelta(minutes=15)  # the lease's lapse, not the saved past check
    # Nothing submitted: still not reporting, the system's, and another worker takes over at the lapse.
    quiet = deletion_case.story(req, NOW, False)
    assert quiet.status_words == f"running, worker not reporting since {since}"
    assert quiet.question.startswith(f"not reporting since {since}: ") and quiet.rota is None


def test_actions_never_contradict_an_unknown_effect() -> None:
    """Under "effect unknown" Confirm not applied is never "no stage's effect is in question"."""
    req = case_row("running", GONE, heartbeat_at=NOW - timedelta(minutes=2))
    settle = shown(deletion_case.actions(req, ALL_DELETION, now=NOW, submitter=False, effect_unknown=True))["settle"]
    assert settle.startswith("the effect is unknown and the next worker looks the operation up") and (
        "no stage's effect is in question" not in settle
    )
    by_hand = case_row("needs_attention", open_question="apply gate_user by hand in a vendor's console")
    offers = deletion_case.actions(by_hand, ALL_DELETION, now=NOW, submitter=False, effect_unknown=False, by_hand=True)
    assert shown(offers)["settle"].startswith("this effect is applied by a person in the vendor's console")


@pytest.mark.parametrize(
    ("status", "applied", "words", "deadline"),
    [
        ("cancelled", 0, "cancelled: nothing deleted", "no longer runs: the request was cancelled (it was due "),
        ("cancelled", 2, "cancelled after 2 stages applied (their effects stand)", "no longer runs"),
        ("completed", 5, "completed", "completed before it (due "),
    ],
)
def test_a_closed_case_reads_its_outcome(status, applied, words, deadline) -> None:
    row = case_row(status, completed_at=NOW - timedelta(days=1), cancel_requested_at=None)
    told = deletion_case.story(row, NOW, False, applied=applied)
    assert told.status_words == words and told.deadline.startswith(deadline) and "met" not in told.deadline
    assert told.closed and told.next_check_at is None and told.question == ""
