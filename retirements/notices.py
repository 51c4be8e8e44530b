"""Staff notices through Django's email framework: at least once, never twice for nothing.

A slot is claimed in a committed transaction before the send (status `sending`,
a claimer and a claim expiry, the attempt counted): the watcher's step claims its
request's due notices with its beat (`claim_due`), the past-the-point-of-no-return
sender one at a time (`deliver`). A concurrent watcher skips a live claim. The
send happens with no transaction open, and the outcome is saved by the claimer
only (for a step, with its boundary decision). A sender that dies between
the send and saving its outcome leaves a claim that runs out, and the slot is
sent again: the seed's at-least-once, and the only way a notice repeats.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction

from core.crashpoints import crash_point
from retirements import policy, store
from retirements.models import NoticeSlot, NoticeStatus, RequestStatus, RetirementRequest, Workspace

SUBJECTS = {
    policy.REQUEST_RECEIVED: "Retirement requested for workspace {slug}",
    policy.REMINDER_7_DAYS: "Workspace {slug} becomes eligible for deletion in 7 days",
    policy.FINAL_WARNING: "Final warning: workspace {slug} is deleted after {eligible}",
    policy.DESTRUCTION_STARTED: "Deletion of workspace {slug} has started",
}
DELIVERABLE = (RequestStatus.WAITING, RequestStatus.EXECUTING)


def deliverable(kind: str, request_status: str) -> bool:
    """Notices of an open request; `destruction_started` also once the purge finished first."""
    return request_status in DELIVERABLE or (
        kind == policy.DESTRUCTION_STARTED and request_status == RequestStatus.COMPLETED
    )


@dataclass(frozen=True)
class Sent:
    """A claimed notice after its send: who claimed it, and the error if the send failed."""

    slot_id: int
    claimer: str
    error: str | None


def claim_due(request: RetirementRequest, workspace: Workspace, *, now: datetime) -> list[NoticeSlot]:
    """Inside the watcher's step transaction (request and workspace locked): claim each due
    notice of a waiting request; a slot another sender holds is skipped, not waited for."""
    claimer = uuid.uuid4().hex
    until = now + timedelta(seconds=settings.RETIREMENT_NOTICE_CLAIM_SECONDS)
    request.workspace = workspace
    slots = store.lock_due_slots(request, now)
    for slot in slots:
        store.claim_slot(slot, claimer=claimer, until=until)
        slot.request = request  # what the message names, already loaded
    return slots


def send_claimed(slot: NoticeSlot) -> Sent:
    """Send a claimed notice with no transaction open; its outcome is saved by `record`."""
    try:
        send_notice(slot)
    except Exception as exc:
        return Sent(slot.id, slot.claimed_by, f"{type(exc).__name__}: {exc}")
    crash_point("notice-sent")
    return Sent(slot.id, slot.claimed_by, None)


def send_quick(woken: store.Woken, slot_id: int, kind: str, claimer: str) -> Sent:
    """`send_claimed` for the watcher's quick step, which read what the message names itself."""
    # The same message from what the step read: unsaved instances, never written.
    request = RetirementRequest(
        id=woken.request_id,
        requested_at=woken.requested_at,
        eligible_at=woken.eligible_at,
        workspace=Workspace(slug=woken.slug, name=woken.name),
        requested_by=get_user_model()(username=woken.requester, email=woken.requester_email),
    )
    try:
        send_notice(NoticeSlot(id=slot_id, kind=kind, request=request))
    except Exception as exc:
        return Sent(slot_id, claimer, f"{type(exc).__name__}: {exc}")
    crash_point("notice-sent")
    return Sent(slot_id, claimer, None)


def record(sent: Sent, *, now: datetime) -> None:
    if sent.error is None:
        store.record_delivered(sent.slot_id, claimer=sent.claimer, now=now)
    else:
        store.record_notice_failure(sent.slot_id, sent.error, claimer=sent.claimer, now=now)


def deliver(slot_id: int, *, now: datetime) -> str:
    claimer = uuid.uuid4().hex
    with transaction.atomic():
        slot = store.lock_slot(slot_id)
        if slot.status == NoticeStatus.SENDING and slot.claim_expires_at and slot.claim_expires_at > now:
            return "claimed by another sender"
        if slot.status not in (NoticeStatus.PENDING, NoticeStatus.SENDING):
            return "skipped"
        if not deliverable(slot.kind, slot.request.status):
            store.suppress_slot(slot)
            return "suppressed"
        if slot.status == NoticeStatus.PENDING and (
            slot.due_at > now or (slot.next_attempt_at and slot.next_attempt_at > now)
        ):
            return "not due"
        until = now + timedelta(seconds=settings.RETIREMENT_NOTICE_CLAIM_SECONDS)
        store.claim_slot(slot, claimer=claimer, until=until)
    try:
        send_notice(slot)
    except Exception as exc:
        store.record_notice_failure(slot_id, f"{type(exc).__name__}: {exc}", claimer=claimer, now=now)
        return "failed"
    crash_point("notice-sent")
    store.record_delivered(slot_id, claimer=claimer, now=now)
    return "delivered"


def send_notice(slot: NoticeSlot) -> None:
    request = slot.request
    recipients = [e for e in [request.requested_by.email, *settings.RETIREMENT_NOTICE_RECIPIENTS] if e]
    if not recipients:
        raise ValueError("no recipients: the requester has no email and RETIREMENT_NOTICE_RECIPIENTS is empty")
    subject = SUBJECTS[slot.kind].format(slug=request.workspace.slug, eligible=request.eligible_at.isoformat())
    body = (
        f"Workspace: {request.workspace.slug} ({request.workspace.name})\n"
        f"Retirement request: {request.id}\n"
        f"Requested by {request.requested_by.get_username()} at {request.requested_at.isoformat()}\n"
        f"Eligible for deletion at: {request.eligible_at.isoformat()}\n"
        f"Notice: {slot.kind}\n"
    )
    send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, recipients)
