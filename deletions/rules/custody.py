"""Who holds a deletion case after each staff decision, what it asks and when it is looked at
next. Pure: the store writes these values as given."""

from __future__ import annotations

from datetime import datetime, timedelta

from deletions.contract import APPROVERS, OPERATORS_ON_CALL, SYSTEM, CancelFacts, CancelPlan, Custody

REVIEW_WINDOW = timedelta(hours=24)  # approvers answer a case back in review within a working day


def submitted() -> Custody:
    """Waiting for approval: never the submitter."""
    return Custody(APPROVERS, "waiting for a second operator to approve the inventory", None)


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


def refused_at_boundary(*, rule: str, now: datetime) -> Custody:
    """The receiver refused an effect for want of authority: the approvers decide again."""
    return Custody(APPROVERS, f"{rule}; approve the same inventory again to resume, or cancel", now + REVIEW_WINDOW)


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
