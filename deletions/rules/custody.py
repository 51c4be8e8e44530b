"""Who holds a deletion case after each staff decision, what it asks and when it is looked at
next. Pure: the store writes these values as given."""

from __future__ import annotations

import calendar
from collections.abc import Collection
from datetime import UTC, datetime, timedelta

from deletions.contract import (
    AFTER_WITHDRAWAL,
    APPROVERS,
    FAULT_ALARMS,
    INTEGRITY,
    OPERATORS_ON_CALL,
    SYSTEM,
    CancelFacts,
    CancelPlan,
    Custody,
)
from deletions.retry import ATTENTION_CHECK
from deletions.rules.workflow import PURGE_DB

REVIEW_WINDOW = timedelta(hours=24)  # approvers answer a case back in review within a working day
AWAITING_APPROVAL = "waiting for an approver (not the submitter) to approve the inventory"


def submitted(now: datetime) -> Custody:
    """Waiting for approval: never the submitter; the approvers answer within a working day."""
    return Custody(APPROVERS, AWAITING_APPROVAL, now + REVIEW_WINDOW)


def approved(now: datetime) -> Custody:
    """The workers run it from here; people are named again when it waits on one."""
    return Custody(SYSTEM, "", now)


def revoked(*, approver: str, by: str, reason: str, now: datetime, withdrawn: bool = False) -> Custody:
    """Back to the approvers, with advice worded by why: a request its requester withdrew is
    cancelled, never approved again; anything else is approved again once resolved, or cancelled."""
    advice = "the requester withdrew it: cancel it" if withdrawn else "approve again once that is resolved, or cancel"
    return Custody(APPROVERS, f"approval by {approver} revoked by {by}: {reason}; {advice}", now + REVIEW_WINDOW)


def expired(*, approver: str, expires_at: datetime, now: datetime) -> Custody:
    return Custody(
        APPROVERS,
        f"approval by {approver} expired at {expires_at:%Y-%m-%d %H:%M:%S} UTC; approve again",
        now + REVIEW_WINDOW,
    )


def resumed(*, by: str, now: datetime) -> Custody:
    """An operator sent it back to the queue: they hold it until it runs again."""
    return Custody(by, "", now)


def refused_at_boundary(*, rule: str, now: datetime, fault: bool = False) -> Custody:
    """The receiver refused an effect for want of authority: the approvers decide again. An
    integrity fault is no want of authority: no approval clears it, so none is advised."""
    if fault:
        return Custody(APPROVERS, f"integrity fault: {rule}; {FAULT_ADVICE}", now + REVIEW_WINDOW)
    return Custody(APPROVERS, f"{rule}; approve the same inventory again to resume, or cancel", now + REVIEW_WINDOW)


def refused_for_a_person(*, rule: str, now: datetime) -> Custody:
    """The receiver refused an effect no approval answers (its database refused it, or the person's data
    remains where its dataset file keeps nothing): nothing of it was applied, and the operators on call
    look within the hour; the case is never completed while it stands."""
    return Custody(
        OPERATORS_ON_CALL,
        f"{rule}; have the receiver's dataset file or data put right, then resume (the stage is sent again), or cancel",
        now + ATTENTION_CHECK,
    )


def in_question(*, rule: str, now: datetime) -> Custody:
    """The receiver may have applied an effect the lookup could not settle (a record under a key not
    registered for it, evidence that names another effect): an integrity fault for the operators on
    call, never "nothing applied"; no approval clears it."""
    return Custody(OPERATORS_ON_CALL, f"integrity fault: {rule}; {IN_QUESTION_ADVICE}", now + ATTENTION_CHECK)


IN_QUESTION_ADVICE = (
    "the effect may have been applied, so it is looked up again, never resent: if the receiver's key changed, "
    "register its new key, close the alarm saying so (close_alarm) and resume; otherwise investigate at the "
    "receiver, or cancel (the case then waits for the lookup to say what was applied)"
)


def own_effect(requested_by: str) -> str:
    """Why the requester may not record the effect of their own request (four eyes on the effect)."""
    return f"four eyes: {requested_by} submitted this request, so they cannot record its effect; another operator must"


def authority_gone(*, revoked_at: datetime | None, expires_at: datetime | None, now: datetime) -> str:
    """Why the latest approval no longer covers an effect ("" while it does)."""
    if revoked_at is not None:
        return f"the approval was revoked at {revoked_at:%Y-%m-%d %H:%M:%S} UTC"
    if expires_at is None or expires_at <= now:
        return "the approval had expired"
    return ""


def applied_after(gone: str, *, stage: str, operation_id: object, by: str, now: datetime) -> Custody:
    """An effect recorded as applied by hand after authority was withdrawn: kept as a fact, never
    a plain completion; the approvers review the case."""
    return Custody(
        APPROVERS,
        f"applied after {gone.removeprefix('the ')}: {by} recorded {stage} (operation {operation_id}) as applied; "
        f"the record is kept; {AFTER_ADVICE}",
        now + REVIEW_WINDOW,
    )


AFTER_ADVICE = (
    "such a case is cancelled, never completed: cancel it, and a person who looked into it closes the alarm with "
    "what they found (close_alarm)"
)
FAULT_ADVICE = (
    "the records were changed outside the back-office, so no approval can clear it: a person investigates and "
    "closes the alarm with what they found (close_alarm), or cancels the case (its alarm stays open until closed)"
)


def fault_refusal(action: str, kind: str = INTEGRITY) -> str:
    """Why `action` is refused while a fault of `kind` is open on a case: the page's disabled
    reason and the service's refusal alike."""
    if kind == AFTER_WITHDRAWAL:
        return (
            f"an effect was applied by hand after the approval was withdrawn (its alarm is open), so the case "
            f"cannot be {action}: {AFTER_ADVICE}"
        )
    return f"an integrity fault is open on this case, so it cannot be {action}: {FAULT_ADVICE}"


def faults_refusal(action: str, *, open_faults: Collection[str], applied_after: bool) -> str:
    """Why `action` (approved, resumed, recorded, completed) is refused on a case with a fault, or
    "". Any open fault refuses it; an effect applied by hand after withdrawal refuses it for good
    (its alarm closed or not): such a case is cancelled, never completed."""
    for kind in (AFTER_WITHDRAWAL, INTEGRITY):
        if kind in open_faults:
            return fault_refusal(action, kind)
    if applied_after:
        return (
            f"an effect was applied by hand after the approval was withdrawn, so the case cannot be {action}: "
            "such a case is cancelled, never completed"
        )
    return ""


NO_FAULT = "no integrity or applied-after-withdrawal alarm is open on this case"


def close_refusal(
    kind: str, *, open_faults: Collection[str], actor: str, submitter: str, recorded_by: Collection[str]
) -> str:
    """Why `actor` may not close the alarm `kind` of a case, or "". Only a fault is closed by hand
    (the others clear when what they wait for settles), and never by the case's submitter (`submitter`,
    "" when the actor is not) nor, for an effect applied after withdrawal, by who recorded it."""
    if kind not in FAULT_ALARMS:
        return (
            f"{kind[:40]!r} is not an alarm a person closes ({', '.join(FAULT_ALARMS)}); "
            "the others clear when what they wait for settles"
        )
    if kind not in open_faults:
        return f"no {kind} alarm is open on this case"
    if submitter:
        return f"four eyes: {submitter} submitted this request, so another person closes its alarm"
    if kind == AFTER_WITHDRAWAL and actor in recorded_by:
        return f"{actor} recorded the effect this alarm is about, so another person closes it"
    return ""


def record_refusal(*, operation_id: object, recorded: tuple[str, bool, datetime] | None) -> str:
    """Why a record of the effect handed over now is refused, or "": a record is final, one per
    hand-over (`recorded`: who made the one there is, applied or not, and when)."""
    if recorded is None:
        return ""
    by, applied, at = recorded
    return (
        f"operation {operation_id} was already recorded {'applied' if applied else 'not applied'} by {by} at "
        f"{at:%Y-%m-%d %H:%M:%S} UTC for this hand-over: a record is final; a correction is an approver's "
        "(correct_effect), made by another person, and keeps both"
    )


def agents_refusal(*, stage: str, applied: bool, has_agents: bool | None) -> str:
    """Why a record of an effect applied by hand (or its correction) must say otherwise about the
    agents, or "": an applied purge_db says whether agents are left (the rules' branch), nothing
    else says it."""
    if stage == PURGE_DB and applied and has_agents is None:
        return f"{stage} applied: say whether agents are left (--has-agents yes|no)"
    if has_agents is not None and not (stage == PURGE_DB and applied):
        return (
            f"--has-agents says what an applied purge_db left; this is {stage}"
            f"{'' if applied else ', recorded as not applied'}"
        )
    return ""


def correction_refusal(
    *, actor: str, submitter: str, recorded_by: str | None, corrected_by: str | None, stage_done: bool
) -> str:
    """Why `actor` may not correct the case's latest record of an effect applied by hand, or "": a
    correction is an approver's who made neither that record nor the request (`submitter`, "" when
    the actor is not), of a record not corrected yet, while its stage has not completed from it."""
    if recorded_by is None:
        return "no effect was recorded by hand on this case: nothing to correct"
    if submitter:
        return f"four eyes: {submitter} submitted this request, so another person corrects its records"
    if actor == recorded_by:
        return f"{actor} made that record: a correction is another person's, an approver's"
    if corrected_by is not None:
        return f"that record was already corrected by {corrected_by}: correct the correction instead"
    if stage_done:
        return "its stage completed from that record: the saved evidence is never rewritten"
    return ""


def cancel(f: CancelFacts, *, by: str, reason: str, now: datetime) -> CancelPlan:
    """A cancellation ends the request now only when nothing runs and nothing submitted is unsettled.
    A submission whose outcome is unknown is never claimed prevented: the case stays open, held by
    the operators on call and due now, until a worker looks the operation up."""
    if f.unsettled is not None:
        op, stage = f.unsettled
        return CancelPlan(
            ends_now=False,
            action=f"cancellation recorded by {by}; operation {op} is being looked up before it ends",
            custody=Custody(
                OPERATORS_ON_CALL,
                f"cancellation recorded while operation {op} ({stage}) may have taken effect; the worker looks it "
                "up at the target system before the case closes, and says whether it was applied",
                now,
            ),
        )
    if f.worker_live:
        return CancelPlan(False, f"cancellation recorded by {by}; the worker stops at its next transition", None)
    done = f"; {f.completed} completed stage(s) stay done" if f.started else ""
    return CancelPlan(True, f"cancelled by {by}: {reason}{done}", None)


def add_months(when: datetime, months: int) -> datetime:
    """The same day and time `months` calendar months later, the month's last day when it is
    shorter (31 January + 1 month is 28 or 29 February)."""
    month0 = when.month - 1 + months
    year, month = when.year + month0 // 12, month0 % 12 + 1
    return when.replace(year=year, month=month, day=min(when.day, calendar.monthrange(year, month)[1]))


def due(received_at: datetime, months: int) -> datetime:
    """The legal deadline of a request received at `received_at` (GDPR Art. 12(3): one month)."""
    return add_months(received_at, months)


EARLIEST_RECEIPT = datetime(2000, 1, 1, tzinfo=UTC)


def received_refusal(received_at: datetime, now: datetime) -> str:
    """Why an intake's received time is refused, or "": never in the future, never before 2000.
    Both are read against the server's clock, so a refusal is the case's (409), not the input's
    shape (the API's document can declare a date-time, not a window around now)."""
    if received_at > now:
        return "the received time is refused: it is in the future"
    if received_at < EARLIEST_RECEIPT:
        return f"the received time is refused: it is before {EARLIEST_RECEIPT:%Y-%m-%d}"
    return ""


def extension_refusal(*, received_at: datetime, due_at: datetime, until: datetime, max_months: int) -> str:
    """Why extending the deadline to `until` is refused, or "": later than now's deadline and at
    most `max_months` after receipt (one month plus two further months, by default)."""
    limit = add_months(received_at, max_months)
    if until <= due_at:
        return f"an extension moves the deadline later than {due_at:%Y-%m-%d %H:%M:%S} UTC"
    if until > limit:
        return (
            f"the deadline is refused: at most {max_months} months after receipt "
            f"({limit:%Y-%m-%d %H:%M:%S} UTC), the legal maximum"
        )
    return ""
