"""Approval evidence and the parent status, saved together."""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID

from django.db import transaction

from deletions.models import DeletionApproval, DeletionRequest, Status


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


def save_approval(
    req: DeletionRequest, *, approved_by: str, digest: str, now: datetime, ttl: timedelta
) -> DeletionApproval:
    """Save one approval of the exact digest and move the locked request to approved, together."""
    approval = DeletionApproval.objects.create(
        request=req, approved_by=approved_by, approved_at=now, inventory_digest=digest, expires_at=now + ttl
    )
    req.approve()
    req.owner = approved_by
    req.open_question = ""
    req.next_check_at = now
    req.last_action = f"approved by {approved_by}"
    req.updated_at = now
    req.save(update_fields=["status", "owner", "open_question", "next_check_at", "last_action", "updated_at"])
    return approval


def latest(req: DeletionRequest) -> DeletionApproval | None:
    return req.approvals.order_by("-approved_at").first()
