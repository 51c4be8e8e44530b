"""Staff notices through Django's email framework, delivered at least once.

The slot is re-checked under its lock, the attempt counted, the lock released;
then the mail is sent and its outcome saved. A send followed by a failed save
leaves the slot pending, so it is sent again: at least once, never exactly once.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction

from retirements import policy, store
from retirements.models import NoticeSlot, NoticeStatus, RequestStatus

SUBJECTS = {
    policy.REQUEST_RECEIVED: "Retirement requested for workspace {slug}",
    policy.REMINDER_7_DAYS: "Workspace {slug} becomes eligible for deletion in 7 days",
    policy.FINAL_WARNING: "Final warning: workspace {slug} is deleted after {eligible}",
    policy.DESTRUCTION_STARTED: "Deletion of workspace {slug} has started",
}
DELIVERABLE = (RequestStatus.WAITING, RequestStatus.EXECUTING)


def deliver(slot_id: int, *, now: datetime) -> str:
    with transaction.atomic():
        slot = store.lock_slot(slot_id)
        if slot.status != NoticeStatus.PENDING:
            return "skipped"
        if slot.request.status not in DELIVERABLE:
            store.suppress_slot(slot)
            return "suppressed"
        if slot.due_at > now or (slot.next_attempt_at and slot.next_attempt_at > now):
            return "not due"
        store.count_attempt(slot)
    try:
        send_notice(slot)
    except Exception as exc:
        store.record_notice_failure(slot_id, f"{type(exc).__name__}: {exc}", now=now)
        return "failed"
    store.record_delivered(slot_id, now=now)
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
