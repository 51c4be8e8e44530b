"""Staff notices through Django's email framework, delivered at least once.

The slot is re-checked under its lock, the attempt counted, the lock released;
then the mail is sent and its outcome saved. A send followed by a failed save
leaves the slot pending, so it is sent again: at least once, never exactly once.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction

from retirements import policy
from retirements.models import NoticeSlot, NoticeStatus, RequestStatus
from retirements.records import logger, raise_alarm

SUBJECTS = {
    policy.REQUEST_RECEIVED: "Retirement requested for workspace {slug}",
    policy.REMINDER_7_DAYS: "Workspace {slug} becomes eligible for deletion in 7 days",
    policy.FINAL_WARNING: "Final warning: workspace {slug} is deleted after {eligible}",
    policy.DESTRUCTION_STARTED: "Deletion of workspace {slug} has started",
}
DELIVERABLE = (RequestStatus.WAITING, RequestStatus.EXECUTING)


def due_slot_ids(request_id: UUID, now: datetime) -> list[int]:
    return list(
        NoticeSlot.objects.filter(request_id=request_id, status=NoticeStatus.PENDING, due_at__lte=now)
        .exclude(next_attempt_at__gt=now)
        .order_by("due_at", "id")
        .values_list("id", flat=True)
    )


def deliver(slot_id: int, *, now: datetime) -> str:
    with transaction.atomic():
        slots = NoticeSlot.objects.select_for_update().select_related("request__workspace", "request__requested_by")
        slot = slots.get(id=slot_id)
        if slot.status != NoticeStatus.PENDING:
            return "skipped"
        if slot.request.status not in DELIVERABLE:
            slot.status = NoticeStatus.SUPPRESSED
            slot.save(update_fields=["status"])
            return "suppressed"
        if slot.due_at > now or (slot.next_attempt_at and slot.next_attempt_at > now):
            return "not due"
        slot.attempts += 1
        slot.save(update_fields=["attempts"])
    try:
        send_notice(slot)
    except Exception as exc:
        record_failure(slot_id, f"{type(exc).__name__}: {exc}", now=now)
        return "failed"
    record_delivered(slot_id, now=now)
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


def record_delivered(slot_id: int, *, now: datetime) -> None:
    NoticeSlot.objects.filter(id=slot_id, status=NoticeStatus.PENDING).update(
        status=NoticeStatus.DELIVERED, delivered_at=now, next_attempt_at=None, last_error=""
    )


def record_failure(slot_id: int, error: str, *, now: datetime) -> None:
    with transaction.atomic():
        slot = NoticeSlot.objects.select_for_update().select_related("request").get(id=slot_id)
        retry = policy.notice_retry(slot.attempts, now)
        slot.last_error = error
        slot.next_attempt_at = retry.next_attempt_at
        if retry.exhausted:
            slot.status = NoticeStatus.FAILED
        slot.save(update_fields=["last_error", "next_attempt_at", "status"])
        logger.warning("notice failed slot=%s kind=%s attempt=%s", slot.id, slot.kind, slot.attempts)
        if retry.exhausted:
            raise_alarm(
                kind="notice_failed",
                request=slot.request,
                message=f"{slot.kind} notice failed {slot.attempts} times: {error}",
                now=now,
            )
