"""Who holds a deletion case after each staff decision, what it asks and when it is looked at
next. Pure: the store writes these values as given."""

from __future__ import annotations

from datetime import datetime

from deletions.contract import APPROVERS, SYSTEM, Custody


def submitted() -> Custody:
    """Waiting for approval: never the submitter."""
    return Custody(APPROVERS, "waiting for a second operator to approve the inventory", None)


def approved(now: datetime) -> Custody:
    """The workers run it from here; people are named again when it waits on one."""
    return Custody(SYSTEM, "", now)


def revoked(*, approver: str, by: str, reason: str, now: datetime) -> Custody:
    return Custody(APPROVERS, f"approval by {approver} revoked by {by}: {reason}; approve again or cancel", now)


def expired(*, approver: str, expires_at: datetime, now: datetime) -> Custody:
    return Custody(
        APPROVERS, f"approval by {approver} expired at {expires_at:%Y-%m-%d %H:%M:%S} UTC; approve again", now
    )


def resumed(*, by: str, now: datetime) -> Custody:
    """An operator sent it back to the queue: they hold it until it runs again."""
    return Custody(by, "", now)


def refused_at_boundary(*, rule: str, now: datetime) -> Custody:
    """The receiver refused an effect for want of authority: the approvers decide again."""
    return Custody(APPROVERS, f"{rule}; approve the same inventory again to resume, or cancel", now)
