"""Approval evidence and the parent status, saved together."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import transaction

from deletions.errors import Refused, UnknownRequest
from deletions.models import DeletionApproval, DeletionRequest, Status
from deletions.store.requests import inventory_digest

InventoryValidator = Callable[[dict[str, Any]], None]


def expire_if_due(*, request_id: UUID, now: datetime) -> str | None:
    """An approved, unstarted request whose approval expired goes back to review.

    Returns the refusal to report, or None when the approval still holds.
    """
    with transaction.atomic():
        req = DeletionRequest.objects.select_for_update().filter(id=request_id, status=Status.APPROVED).first()
        if req is None:
            return None
        approval = req.approvals.order_by("-approved_at").first()
        if approval is None or approval.expires_at is None or approval.expires_at > now:
            return None
        req.return_to_review()
        req.owner = approval.approved_by
        req.open_question = (
            f"approval by {approval.approved_by} expired at {approval.expires_at.isoformat()}; approve again"
        )
        req.next_check_at = now
        req.last_action = "approval expired; back in review"
        req.updated_at = now
        req.save(update_fields=["status", "owner", "open_question", "next_check_at", "last_action", "updated_at"])
        return (
            f"approval of request {req.id} by {approval.approved_by} expired at {approval.expires_at.isoformat()}; "
            "the request is back in review and nothing was applied"
        )


def approve(
    *,
    request_id: UUID,
    approved_by: str,
    digest: str,
    validate_inventory: InventoryValidator,
    now: datetime,
    ttl: timedelta,
) -> DeletionApproval:
    """Save one approval of the exact inventory digest; validator runs under the lock."""
    with transaction.atomic():
        req = DeletionRequest.objects.select_for_update().filter(id=request_id).first()
        if req is None:
            raise UnknownRequest(f"no deletion request with id {request_id}")
        if req.status != Status.SUBMITTED:
            previous = req.approvals.order_by("-approved_at").first()
            by = f" (approved by {previous.approved_by} at {previous.approved_at.isoformat()})" if previous else ""
            raise Refused(f"request {req.id} is {req.status}, not submitted: it cannot be approved again{by}")
        if approved_by == req.requested_by:
            raise Refused(
                f"four eyes: {approved_by} submitted request {req.id} and cannot approve it; "
                "a second operator must approve"
            )
        recomputed = inventory_digest(req.inventory_json)
        if recomputed != req.inventory_digest:
            raise Refused(f"saved inventory digest {req.inventory_digest} does not match its inventory {recomputed}")
        if digest != req.inventory_digest:
            raise Refused(f"approval digest {digest} does not match inventory {req.inventory_digest}")
        validate_inventory(req.inventory_json)
        approval = DeletionApproval.objects.create(
            request=req,
            approved_by=approved_by,
            approved_at=now,
            inventory_digest=digest,
            expires_at=now + ttl,
        )
        req.approve()
        req.owner = approved_by
        req.open_question = ""
        req.next_check_at = now
        req.last_action = f"approved by {approved_by}"
        req.updated_at = now
        req.save(update_fields=["status", "owner", "open_question", "next_check_at", "last_action", "updated_at"])
        return approval
