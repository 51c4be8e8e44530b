"""Small shared writes: locks in a fixed order, decision log, watcher settlement, alarms."""

from __future__ import annotations

import logging
from datetime import datetime
from uuid import UUID

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from core.errors import NotFound
from retirements import policy
from retirements.models import (
    Alarm,
    Decision,
    NoticeSlot,
    NoticeStatus,
    RetirementRequest,
    RetirementWatcher,
    WatcherStatus,
    Workspace,
)

logger = logging.getLogger("retirements")


def lock_request(request_id: UUID | str) -> tuple[RetirementRequest, Workspace]:
    """Lock workspace, then request: the one lock order every writer follows."""
    workspace_id = RetirementRequest.objects.filter(id=request_id).values_list("workspace_id", flat=True).first()
    if workspace_id is None:
        raise NotFound(f"no retirement request with id {request_id}")
    workspace = Workspace.objects.select_for_update().get(id=workspace_id)
    request = RetirementRequest.objects.select_for_update().select_related("requested_by").get(id=request_id)
    return request, workspace


def log_decision(
    *,
    request: RetirementRequest | None,
    workspace: Workspace,
    actor: User | None,
    action: str,
    reason: str,
    now: datetime,
) -> Decision:
    label = actor.get_username() if actor is not None else "watcher"
    # Ids only in logs: the decision row keeps who and why.
    logger.info(
        "decision request=%s action=%s actor_id=%s",
        request.id if request else None,
        action,
        actor.pk if actor else None,
    )
    return Decision.objects.create(
        request=request,
        workspace=workspace,
        actor=actor,
        actor_label=label,
        action=action,
        reason=reason,
        created_at=now,
    )


def settle_watcher(watcher: RetirementWatcher, *, reason: str, now: datetime, superseded: bool = False) -> None:
    watcher.status = WatcherStatus.SUPERSEDED if superseded else WatcherStatus.SETTLED
    watcher.concluded_at = now
    watcher.conclusion = reason
    watcher.save(update_fields=["status", "concluded_at", "conclusion"])


def suppress_pending_notices(request: RetirementRequest) -> int:
    return NoticeSlot.objects.filter(request=request, status=NoticeStatus.PENDING).update(
        status=NoticeStatus.SUPPRESSED, next_attempt_at=None
    )


def raise_alarm(*, kind: str, request: RetirementRequest, message: str, now: datetime) -> Alarm | None:
    """Save an open alarm (one per kind and request) and log it as an error."""
    logger.error("alarm kind=%s request=%s", kind, request.id)  # the message (maybe addresses) stays in the row
    existing = Alarm.objects.filter(kind=kind, request=request, resolved_at__isnull=True).first()
    if existing:
        return existing
    try:
        with transaction.atomic():
            return Alarm.objects.create(kind=kind, request=request, message=message, created_at=now)
    except IntegrityError:
        return Alarm.objects.filter(kind=kind, request=request, resolved_at__isnull=True).first()


def resolve_alarms(*, kind: str, request: RetirementRequest, now: datetime) -> None:
    Alarm.objects.filter(kind=kind, request=request, resolved_at__isnull=True).update(resolved_at=now)


def slot_views(request: RetirementRequest, *, pending_only: bool = False) -> list[policy.SlotView]:
    """The request's notice slots as the pure policy sees them."""
    slots = NoticeSlot.objects.filter(request=request)
    if pending_only:
        slots = slots.filter(status=NoticeStatus.PENDING)
    return [policy.SlotView(s.id, s.kind, s.due_at, s.status, s.next_attempt_at) for s in slots]
