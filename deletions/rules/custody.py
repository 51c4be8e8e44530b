"""Who holds a deletion case after each staff decision, what it asks and when it is looked at
next. Pure: the store writes these values as given."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta

from deletions.contract import APPROVERS, OPERATORS_ON_CALL, SYSTEM, CancelFacts, CancelPlan, Custody
from deletions.retry import ATTENTION_CHECK

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
    "register its new key and resume; otherwise investigate at the receiver, or cancel (the case then waits for "
    "the lookup to say what was applied)"
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
        "the record is kept; cancel the case (the effect stays recorded), or hand it to a person to review",
        now + REVIEW_WINDOW,
    )


def fault_refusal(action: str) -> str:
    """Why `action` is refused while an integrity fault is open on a case: the page's disabled
    reason and the service's refusal alike."""
    return f"an integrity fault is open on this case, so it cannot be {action}: {FAULT_ADVICE}"


FAULT_ADVICE = (
    "the records were changed outside the back-office, so no approval can clear it: cancel the case, "
    "or hand it to a person to investigate"
)


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
