"""Retirement policy: eligibility, notice plan, wake times, re-planning, notice
retries and the point-of-no-return verdict. Pure: no ORM, no I/O; `now` is an
argument.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timedelta

from core import backoff, present
from core.errors import Refused
from retirements.contract import (  # noqa: F401  (the policy's vocabulary, also read as policy.X)
    ALREADY_DONE,
    ANSWERED_BY_A_MOVE,
    APPLY,
    CLOSE,
    CLOSED_BY_A_PERSON,
    CONCLUDE,
    DESTRUCTION_STARTED,
    FINAL_WARNING,
    HOLD,
    HOLD_AGE,
    NOT_YET_ELIGIBLE,
    PLANNED_NOTICES,
    PROCEED,
    REFUSE,
    REMINDER_7_DAYS,
    REQUEST_RECEIVED,
    SLEEP,
    STALE,
    SUPERSEDED,
    WAIT,
    WATCHER_AGE,
    BoundaryFacts,
    Eligibility,
    NoticeRetry,
    PlannedNotice,
    PurgeFacts,
    Replan,
    SlotView,
    Verdict,
)

STANDARD_WAIT = timedelta(days=30)
NEVER_ACTIVATED_WAIT = timedelta(days=1)
BLOCKER_REVISIT = timedelta(hours=6)
STALL_GRACE = timedelta(minutes=15)
MAX_NOTICE_ATTEMPTS = 6
NOTICE_FIRST_RETRY = timedelta(minutes=1)
NOTICE_MAX_RETRY = timedelta(hours=1)

# Eligibility policies (the waiting period a request gets).
STANDARD = "standard_30_days"
NEVER_ACTIVATED = "never_activated_1_day"
DISPOSABLE_TEST = "disposable_test"
ELIGIBILITY_POLICIES = (STANDARD, NEVER_ACTIVATED, DISPOSABLE_TEST)


def eligibility(
    *, never_activated: bool, disposable: bool, production: bool, disposable_wait: timedelta, now: datetime
) -> Eligibility:
    """30 days; 1 day when never activated; disposable test workspaces a short wait outside production."""
    if disposable:
        if production:
            raise Refused("disposable test workspaces cannot be retired with the short policy in production")
        return Eligibility(DISPOSABLE_TEST, now + disposable_wait)
    if never_activated:
        return Eligibility(NEVER_ACTIVATED, now + NEVER_ACTIVATED_WAIT)
    return Eligibility(STANDARD, now + STANDARD_WAIT)


def notice_plan(requested_at: datetime, eligible_at: datetime) -> list[PlannedNotice]:
    """The staff notices of a waiting period, in due order."""
    plan = [PlannedNotice(REQUEST_RECEIVED, requested_at, gating=True)]
    reminder = eligible_at - timedelta(days=7)
    if reminder > requested_at:
        plan.append(PlannedNotice(REMINDER_7_DAYS, reminder, gating=False))
    plan.append(PlannedNotice(FINAL_WARNING, max(eligible_at - FINAL_WARNING_LEAD, requested_at), gating=True))
    return plan


FINAL_WARNING_LEAD = timedelta(hours=24)  # what the final warning promises: this long before eligibility


WARNING_ON_TIME = timedelta(minutes=1)  # the watcher's tick: a warning this late still counts as on time


def eligible_after_warning(*, eligible_at: datetime, warned_at: datetime, requested_at: datetime) -> datetime:
    """Eligibility once the final warning went out at `warned_at`: a warning later than its plan
    by more than a tick (a failed send re-armed, a stalled watcher) moves eligibility so the lead
    it promises holds in full. A waiting period shorter than the lead promises its own length."""
    lead = min(FINAL_WARNING_LEAD, eligible_at - requested_at)
    if warned_at + lead <= eligible_at + WARNING_ON_TIME:
        return eligible_at
    return warned_at + lead


def next_wake(*, eligible_at: datetime, pending: Iterable[SlotView], blocked_until: datetime | None) -> datetime:
    """The earliest instant the watcher has something to do; a claimed notice whose sender
    may have died is looked at again when its claim runs out."""
    candidates = [s.next_attempt_at or s.due_at for s in pending if s.status == "pending"]
    candidates += [s.claim_expires_at for s in pending if s.status == "sending" and s.claim_expires_at]
    candidates.append(max(eligible_at, blocked_until) if blocked_until else eligible_at)
    return min(candidates)


def replan_on_release(
    *, requested_at: datetime, eligible_at: datetime, held_for: timedelta, slots: Iterable[SlotView], now: datetime
) -> Replan:
    """Eligibility moves by the time on hold, and every notice is planned again from it, so none
    says something false: a pending notice moves to its new time; a reminder whose 7-day lead no
    longer fits (its new time has passed) is suppressed, with why, never sent late; and a final
    warning that went out longer than its lead before the new eligibility (it named the old
    date) is planned again before it."""
    slots = list(slots)
    new_eligible = eligible_at + held_for
    plan = {p.kind: p for p in notice_plan(requested_at, new_eligible)}
    moved: list[tuple[int, datetime]] = []
    suppressed: dict[int, str] = {}
    for slot in slots:
        if slot.status != "pending" or slot.kind not in PLANNED_NOTICES:  # a decision's notice stays as it is
            continue
        target = plan.get(slot.kind)
        if target is None:
            suppressed[slot.id] = "no longer in the plan for the new eligibility"
        elif target.due_at < now and slot.kind == REMINDER_7_DAYS:
            suppressed[slot.id] = _lead_gone(new_eligible, now)
        elif target.due_at != slot.due_at:
            moved.append((slot.id, target.due_at))
    kinds = {s.kind for s in slots}
    added = [p for kind, p in plan.items() if kind not in kinds and not (kind == REMINDER_7_DAYS and p.due_at < now)]
    warned = [s.delivered_at for s in slots if s.kind == FINAL_WARNING and s.delivered_at is not None]
    still = any(s.kind == FINAL_WARNING and s.status in ("pending", "sending") for s in slots)
    lead = min(FINAL_WARNING_LEAD, new_eligible - requested_at)
    moved_to = f"eligibility moved from {present.absolute(eligible_at)} to {present.absolute(new_eligible)}"
    why = f"re-planned on release after {present.span(held_for.total_seconds())} on hold: {moved_to}"
    added = [replace(p, why=why) for p in added]
    if warned and not still and max(warned) + lead + WARNING_ON_TIME < new_eligible:
        again = (
            f"planned again on release: the final warning sent {present.absolute(max(warned))} named "
            f"{present.absolute(eligible_at)}; {moved_to}"
        )
        added.append(PlannedNotice(FINAL_WARNING, max(new_eligible - lead, now), gating=True, why=again))
    due = dict(moved)
    pending = [
        SlotView(s.id, s.kind, due.get(s.id, s.due_at), s.status, s.next_attempt_at if s.id not in due else None,
                 s.claim_expires_at)
        for s in slots
        if s.status in ("pending", "sending") and s.id not in suppressed
    ] + [SlotView(0, p.kind, p.due_at, "pending") for p in added]  # fmt: skip
    wake = next_wake(eligible_at=new_eligible, pending=pending, blocked_until=None)
    return Replan(new_eligible, moved, added, list(suppressed), wake, suppressed, why)


def _lead_gone(eligible_at: datetime, now: datetime) -> str:
    return (
        f"suppressed on release: eligibility is {present.span((eligible_at - now).total_seconds())} away, "
        "less than the reminder's 7-day lead"
    )


def days_until(eligible_at: datetime, now: datetime) -> str:
    """A notice's "in N days", from the eligibility as it is when the notice is sent."""
    days = max(0, round((eligible_at - now) / timedelta(days=1)))
    return "today" if days == 0 else f"in {days} day{'s' if days != 1 else ''}"


def notice_retry(attempts: int, now: datetime) -> NoticeRetry:
    """Six attempts in all: 1 min, doubling, capped at 1 h; then the slot fails for good."""
    if attempts >= MAX_NOTICE_ATTEMPTS:
        return NoticeRetry(exhausted=True, next_attempt_at=None)
    delay = backoff.delay(attempts, first=NOTICE_FIRST_RETRY, cap=NOTICE_MAX_RETRY)
    return NoticeRetry(exhausted=False, next_attempt_at=now + delay)


def first_verdict(
    *, request_status: str, watcher_is_authoritative: bool, now: datetime, eligible_at: datetime
) -> Verdict | None:
    """The boundary's first rules, read from the request alone; None when the rest decides.
    The watcher's quick step runs when this says WAIT, not yet eligible (the general step
    decides everything else)."""
    if not watcher_is_authoritative:
        return Verdict(SUPERSEDED, "superseded watcher woke; no action taken")
    if request_status == "held":
        return Verdict(SLEEP, "request is on hold")
    if request_status != "waiting":
        return Verdict(CONCLUDE, f"request is {request_status}")
    if now < eligible_at:
        return Verdict(WAIT, NOT_YET_ELIGIBLE, eligible_at)
    return None


def point_of_no_return(f: BoundaryFacts) -> Verdict:
    first = first_verdict(
        request_status=f.request_status,
        watcher_is_authoritative=f.watcher_is_authoritative,
        now=f.now,
        eligible_at=f.eligible_at,
    )
    if first is not None:
        return first
    if f.workspace_lifecycle != "deletion_pending":
        return Verdict(CLOSE, f"workspace is {f.workspace_lifecycle}, not deletion_pending")
    if f.legal_hold:
        return Verdict(CLOSE, "workspace has a legal hold")
    if f.protected_reason:
        return Verdict(CLOSE, f"workspace is protected: {f.protected_reason}")
    lost = [
        what
        for what, ok in (
            ("is no longer active", f.requester_active),
            ("is no longer staff", f.requester_staff),
            ("lacks the request_retirement permission", f.requester_permitted),
        )
        if not ok
    ]
    if lost:
        return Verdict(HOLD, f"requester {f.requester} {' and '.join(lost)}")
    if f.undelivered_gating:
        blocker = f"gating notice(s) not delivered: {', '.join(f.undelivered_gating)}"
        return Verdict(WAIT, blocker, f.now + BLOCKER_REVISIT, blocker=blocker)
    return Verdict(PROCEED, "all rechecks passed")


def purge_verdict(f: PurgeFacts) -> Verdict:
    if f.operation_id != f.job_operation_id:
        return Verdict(STALE, f"operation {f.operation_id} is not this job's operation {f.job_operation_id}")
    if f.holder_generation != f.generation or (f.job_status == "queued" and f.holder != f.owner):
        return Verdict(
            STALE,
            f"stale executor {f.owner} generation {f.generation}: the job is at generation "
            f"{f.holder_generation}{f' held by {f.holder}' if f.holder else ''}",
        )
    if f.job_status == "done":
        return Verdict(ALREADY_DONE, f"operation {f.operation_id} was already applied")
    if f.job_status != "queued":
        return Verdict(STALE, f"purge job is {f.job_status}")
    if f.request_status != "executing":
        return Verdict(REFUSE, f"request is {f.request_status}, not executing")
    if not f.requester_may:
        return Verdict(REFUSE, f"requester {f.requester} is no longer active staff holding request_retirement")
    return Verdict(APPLY, "all rechecks passed")


def is_stalled(
    *,
    watcher_status: str,
    watcher_started: bool,
    created_at: datetime,
    next_wake_at: datetime | None,
    alive_until: datetime | None,
    now: datetime,
) -> str | None:
    """Why the current watcher of a waiting request counts as stalled, or None. A current watcher
    that settled (or was superseded) while its request still waits concludes nothing: stalled.
    Otherwise an overdue wake-up is not enough: a watcher that shows a sign of life (a heartbeat
    within the notice claim time, or a notice claim that has not run out: `alive_until`) may be
    between a send and saving it, and seed 002's recovery refuses while the old execution may run."""
    if watcher_status in ("settled", "superseded"):
        return f"watcher {watcher_status} without concluding the request"
    if alive_until is not None and now < alive_until:
        return None
    if not watcher_started and now - created_at > STALL_GRACE:
        return f"watcher never started (created {present.absolute(created_at)})"
    if next_wake_at is not None and now - next_wake_at > STALL_GRACE:
        return f"watcher missed its wake-up at {present.absolute(next_wake_at)} by more than 15 minutes"
    return None


def failing(*, next_wake_at: datetime | None, error: str, now: datetime) -> str | None:
    """Why a watcher whose step just failed needs a person, or None (not yet: it retries each
    tick). A watcher that beats and then fails shows a sign of life, so it is not stalled and
    resume would not help; once its wake-up is overdue by the grace, its failing is an alarm."""
    if next_wake_at is None or now - next_wake_at <= STALL_GRACE:
        return None
    return (
        f"watcher missed its wake-up at {present.absolute(next_wake_at)} by more than 15 minutes: "
        f"each step fails ({error[:200]}); it retries every tick"
    )


def custody_times(
    *,
    status: str,
    eligible_at: datetime,
    next_wake_at: datetime | None,
    held_at: datetime | None,
    hold_limit: timedelta,
) -> tuple[datetime | None, datetime | None]:
    """An open retirement's next check and deadline (SPEC 5.5): waiting, its next wake-up and its
    eligibility; held, the hold's review date (when a hold grown old raises its alarm) for both;
    ended, neither."""  # fmt: skip
    if status == "held" and held_at is not None:
        review = held_at + hold_limit
        return review, review
    if status in ("waiting", "executing"):
        return next_wake_at, eligible_at
    return None, None


RESUME_RULE = (
    "only a watcher that missed its wake-up by 15 minutes and shows no sign of life (no heartbeat or notice "
    "claim within the claim time), or that settled without concluding the request, is replaced"
)


def resume_refusal(
    *,
    request_status: str,
    watcher_status: str | None,
    stalled: str | None,
    next_wake_at: datetime | None,
    alive_until: datetime | None,
    now: datetime,
) -> str:
    """Why the watcher must not be replaced now ("" when it may): the seed's recovery refuses while
    the old execution still runs, and a watcher asleep until a wake-up weeks away still runs."""  # fmt: skip
    if watcher_status is None or watcher_status in ("settled", "superseded") or stalled:
        return ""
    if request_status == "held":
        return f"the watcher sleeps while the request is on hold (releasing wakes it); {RESUME_RULE}"
    overdue = next_wake_at is not None and next_wake_at <= now
    if overdue and alive_until is not None and now < alive_until:
        return (
            f"the watcher may still be running: it showed a sign of life until {present.absolute(alive_until)} "
            f"({present.relative(alive_until, now)}); {RESUME_RULE}"
        )
    due = f"its next wake-up is {present.absolute(next_wake_at)} ({present.relative(next_wake_at, now)})"
    return f"the watcher is healthy: {due if next_wake_at else 'it is starting'}; {RESUME_RULE}"


AGE_WARNING = timedelta(days=30)  # a watcher's lifetime alarm comes this long before the lifetime ends


def age_alarms(
    *,
    status: str,
    requested_at: datetime,
    held_at: datetime | None,
    lifetime: timedelta,
    hold_limit: timedelta,
    now: datetime,
) -> list[tuple[str, str]]:
    """Alarms an open request's age raises (kind, message), ahead of time: seed 002's watcher may
    run a year, so a request nearing the watcher's lifetime, or held past the hold limit, asks
    a person to conclude it before anything runs out."""  # fmt: skip
    out: list[tuple[str, str]] = []
    if status not in ("waiting", "held"):
        return out
    ends = requested_at + lifetime
    if now >= ends - AGE_WARNING:
        out.append((WATCHER_AGE, (
            f"open for {present.span((now - requested_at).total_seconds())}: its watcher reaches its lifetime of "
            f"{present.span(lifetime.total_seconds())} at {present.absolute(ends)}; release, cancel or conclude it"
        )))  # fmt: skip
    if status == "held" and held_at is not None and now - held_at >= hold_limit:
        out.append((HOLD_AGE, (
            f"on hold for {present.span((now - held_at).total_seconds())}, past the limit of "
            f"{present.span(hold_limit.total_seconds())}; release or cancel it"
        )))  # fmt: skip
    return out


# Alarms a person closes: those no state move answers (`contract.CLOSED_BY_A_PERSON`).
NOTHING_TO_CLOSE = (
    f"no alarm that only a person closes ({' or '.join(CLOSED_BY_A_PERSON).replace('_', ' ')}) is open: "
    "nothing to close"
)


def closable_alarms(open_kinds: Iterable[str]) -> list[str]:
    """The open alarms of a case that a person closes (no state move answers them)."""
    return sorted(set(open_kinds) & set(CLOSED_BY_A_PERSON))


def alarm_to_close(kind: str, open_kinds: Iterable[str]) -> tuple[str, str]:
    """Which open alarm a person's close_alarm decision closes, and why none may be: (kind, "")
    or ("", why). `kind` "" names the one such alarm open. An alarm a state move answers closes
    with that move only (`contract.ANSWERED_BY_A_MOVE`), never by hand."""
    closable = closable_alarms(open_kinds)
    if not kind:
        if len(closable) == 1:
            return closable[0], ""
        return (
            "",
            f"{len(closable)} alarms are open: say which ({' or '.join(closable)})" if closable else NOTHING_TO_CLOSE,
        )
    if kind in ANSWERED_BY_A_MOVE:
        return "", f"a {kind} alarm closes with the move that answers it, {ANSWERED_BY_A_MOVE[kind]}, never by hand"
    if kind not in closable:
        return "", f"no {kind} alarm is open: nothing to close"
    return kind, ""
