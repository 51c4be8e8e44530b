"""Staff notices through Django's email framework: at least once, never twice for nothing.

A slot is claimed in a committed transaction before the send (status `sending`,
a claimer, a claim expiry and the next claim generation, the attempt counted): the
watcher's step claims its request's due notices with its beat (`claim_due`), the
past-the-point-of-no-return sender one at a time (`deliver`). A concurrent watcher
skips a live claim. Immediately before each send the sender re-checks its claim
(claimer and generation, one statement that also renews it, `lost_claim`) and stands
down once it was taken over; the send happens with no transaction open, and the
outcome is saved under the same fence only (for a step, with its boundary decision),
so a stale holder's save changes nothing. The one window left is between that check
and the saved outcome: a sender that dies there after sending, or stalls there past its
(renewed) claim, leaves the slot to be sent again: the seed's at-least-once, and the
only way a notice repeats.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import transaction

from core import clock, present
from core.crashpoints import crash_point
from retirements import policy
from retirements.contract import DECISION_NOTICES, NoticeClaim
from retirements.models import NoticeSlot, NoticeStatus, RequestStatus
from retirements.store import locks
from retirements.store import notices as store_notices

SUBJECTS = {
    policy.REQUEST_RECEIVED: "Retirement requested for workspace {slug}",
    policy.REMINDER_7_DAYS: "Workspace {slug} becomes eligible for deletion {in_days}",
    policy.FINAL_WARNING: "Final warning: workspace {slug} is deleted after {eligible}",
    policy.DESTRUCTION_STARTED: "Deletion of workspace {slug} has started",
    "held": "Retirement of workspace {slug} is on hold",
    "released": "Retirement of workspace {slug} is released; eligible after {eligible}",
    "cancelled": "Retirement of workspace {slug} is cancelled; the workspace is disabled again",
    "held_at_point_of_no_return": "Retirement of workspace {slug} was held at the point of no return",
    "closed_at_point_of_no_return": "Retirement of workspace {slug} was closed without purge at the point of no return",
}
DELIVERABLE = (RequestStatus.WAITING, RequestStatus.EXECUTING)
logger = logging.getLogger("retirements")


def deliverable(kind: str, request_status: str) -> bool:
    """Notices of an open request; `destruction_started` also once the purge finished first; a
    decision's notice always (it reports what happened)."""
    return (
        request_status in DELIVERABLE
        or kind in DECISION_NOTICES.values()
        or (kind == policy.DESTRUCTION_STARTED and request_status == RequestStatus.COMPLETED)
    )


@dataclass(frozen=True)
class Sent:
    """A claimed notice after its send: who claimed it (and the claim's generation), the error if
    the send failed, or why the sender stood down without sending (its claim was taken over)."""

    slot_id: int
    claimer: str
    error: str | None
    kind: str = ""
    generation: int = 0
    stood_down: str | None = None

    @property
    def delivered(self) -> bool:
        return self.error is None and self.stood_down is None


@dataclass(frozen=True)
class Letter:
    """What a notice says and to whom: read by the watcher's step under its locks (`Woken`), or
    from a slot's rows."""

    kind: str
    request_id: UUID
    slug: str
    name: str
    requester: str
    requester_email: str
    requested_at: datetime
    eligible_at: datetime

    @classmethod
    def of_slot(cls, slot: NoticeSlot) -> Letter:
        request = slot.request
        requester = request.requested_by
        return cls(
            slot.kind, request.id, request.workspace.slug, request.workspace.name, requester.get_username(),
            requester.email, request.requested_at, request.eligible_at,
        )  # fmt: skip


def send(woken: locks.Woken, claim: NoticeClaim, claimer: str, *, now: datetime, connection: Any = None) -> Sent:
    """Send a notice the watcher's step claimed, with no transaction open, from what the step
    read under its locks (a batch's sends share one mail backend, `connection`), once the claim
    is checked to be still this claimer's; its outcome is saved by `record`."""
    lost = _lost(claim, claimer, now=now)
    if lost is not None:
        return Sent(claim.slot_id, claimer, None, claim.kind, claim.generation, stood_down=lost)
    letter = Letter(
        claim.kind, woken.request_id, woken.slug, woken.name, woken.requester, woken.requester_email,
        woken.requested_at, woken.eligible_at,
    )  # fmt: skip
    try:
        send_notice(letter, now=now, connection=connection)
    except Exception as exc:
        return Sent(claim.slot_id, claimer, f"{type(exc).__name__}: {exc}", claim.kind, claim.generation)
    crash_point("notice-sent")
    return Sent(claim.slot_id, claimer, None, claim.kind, claim.generation)


def _lost(claim: NoticeClaim, claimer: str, *, now: datetime) -> str | None:
    """The check just before a send (`store.notices.lost_claim`, which renews a claim still held);
    a sender whose claim was taken over stands down, and says so."""
    until = max(now, clock.now()) + timedelta(seconds=settings.RETIREMENT_NOTICE_CLAIM_SECONDS)
    lost = store_notices.lost_claim(claim, claimer=claimer, until=until)
    if lost is not None:
        logger.warning("notice slot=%s kind=%s not sent, stood down: %s", claim.slot_id, claim.kind, lost)
    return lost


def record(sent: list[Sent], *, now: datetime) -> None:
    """Save what was sent (inside the transaction that holds the requests' locks): the
    deliveries in one statement per claimer, each failure on its own (retry or give up), each
    fenced by its claim; nothing for a notice whose sender stood down."""
    for claimer in {s.claimer for s in sent}:
        delivered = [(s.slot_id, s.generation) for s in sent if s.delivered and s.claimer == claimer]
        if delivered:
            store_notices.record_delivered(delivered, claimer=claimer, now=now)
    for failure in sent:
        if failure.error is not None:
            _record_failure(failure, now=now)


def _record_failure(failure: Sent, *, now: datetime) -> None:
    store_notices.record_notice_failure(
        failure.slot_id,
        failure.error or "",
        claimer=failure.claimer,
        generation=failure.generation,
        now=now,
        retry=lambda attempts: policy.notice_retry(attempts, now),
    )


def deliver(slot_id: int, *, now: datetime) -> str:
    """A notice past the point of no return, claimed, sent and recorded on its own."""
    claimer = uuid.uuid4().hex
    with transaction.atomic():
        slot = locks.lock_slot(slot_id)
        if slot.status == NoticeStatus.SENDING and slot.claim_expires_at and slot.claim_expires_at > now:
            return "claimed by another sender"
        if slot.status not in (NoticeStatus.PENDING, NoticeStatus.SENDING):
            return "skipped"
        if not deliverable(slot.kind, slot.request.status):
            why = f"suppressed: not sent once the request is {slot.request.status}"
            store_notices.replan([(slot.id, None, why)], sources=[NoticeStatus.PENDING, NoticeStatus.SENDING])
            return "suppressed"
        until = now + timedelta(seconds=settings.RETIREMENT_NOTICE_CLAIM_SECONDS)
        claimed = store_notices.claim_due([slot.request_id], claimer=claimer, until=until, now=now, slot_id=slot_id)
        if not claimed:
            return "not due"
    (claim,) = claimed[slot.request_id]
    crash_point("notice-claimed")  # claimed and committed, not yet sent: a pause here can outlive the claim
    lost = _lost(claim, claimer, now=now)
    if lost is not None:
        return f"stood down: {lost}"
    try:
        send_notice(Letter.of_slot(slot), now=now)
    except Exception as exc:
        failed = Sent(slot_id, claimer, f"{type(exc).__name__}: {exc}", claim.kind, claim.generation)
        _record_failure(failed, now=now)
        return "failed"
    crash_point("notice-sent")
    if not store_notices.record_delivered([(slot_id, claim.generation)], claimer=claimer, now=now):
        return "sent; its save refused: the claim was taken over meanwhile"
    return "delivered"


def send_notice(letter: Letter, *, now: datetime, connection: Any = None) -> None:
    """Send a notice whose words are worked out from the eligibility as it is at `now` (the
    step's time, the one its outcome is saved with): a final warning names the eligibility its
    own send makes true (`policy.eligible_after_warning`: a late warning moves it), a reminder
    says how many days are left."""
    recipients = [e for e in [letter.requester_email, *settings.RETIREMENT_NOTICE_RECIPIENTS] if e]
    if not recipients:
        raise ValueError("no recipients: the requester has no email and RETIREMENT_NOTICE_RECIPIENTS is empty")
    eligible = letter.eligible_at
    if letter.kind == policy.FINAL_WARNING:
        eligible = policy.eligible_after_warning(eligible_at=eligible, warned_at=now, requested_at=letter.requested_at)
    in_days = policy.days_until(eligible, now)
    subject = SUBJECTS[letter.kind].format(slug=letter.slug, eligible=present.absolute(eligible), in_days=in_days)
    body = (
        f"Workspace: {letter.slug} ({letter.name})\n"
        f"Retirement request: {letter.request_id}\n"
        f"Requested by {letter.requester} at {present.absolute(letter.requested_at)}\n"
        f"Eligible for deletion at: {present.absolute(eligible)}\n"
        f"Notice: {present.humanize(letter.kind)}\n"
    )
    EmailMessage(subject, body, settings.DEFAULT_FROM_EMAIL, recipients, connection=connection).send()
