"""Approval evidence and the parent status, saved together."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.db import transaction

from core import authority
from deletions.models import DeletionApproval, DeletionRequest, Status
from deletions.store.requests import inventory_digest
from deletions.store.types import APPROVERS, SYSTEM, AuthorityFacts


def expire_if_due(*, request_id: UUID, now: datetime) -> str | None:
    """An approved, unstarted request whose approval expired goes back to submitted.

    Returns the refusal to report, or None when the approval still holds.
    """
    with transaction.atomic():
        req = DeletionRequest.objects.select_for_update().filter(id=request_id, status=Status.APPROVED).first()
        if req is None or req.stages.exists():
            return None  # a started request is checked where each effect lands (receiver.apply_effect)
        approval = latest(req)
        if approval is None or approval.expires_at is None or approval.expires_at > now:
            return None
        req.return_to_review()
        req.owner = APPROVERS
        req.open_question = (
            f"approval by {approval.approved_by} expired at {approval.expires_at:%Y-%m-%d %H:%M:%S} UTC; approve again"
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
    req: DeletionRequest, *, approved_by: Any, digest: str, rules_version: int, now: datetime, ttl: timedelta
) -> DeletionApproval:
    """Save one approval of the exact proposal and move the locked request to approved, together."""
    username = approved_by.get_username()
    approval = DeletionApproval.objects.create(
        request=req,
        approved_by=username,
        approved_by_user=approved_by,
        approved_at=now,
        inventory_digest=digest,
        inventory_version=req.inventory_version,
        rules_version=rules_version,
        expires_at=now + ttl,
    )
    req.approve()
    req.owner = SYSTEM  # the workers run it from here; people are named again when it waits on one
    req.open_question = ""
    req.next_check_at = now
    req.last_action = f"approved by {username}"
    req.updated_at = now
    req.save(update_fields=["status", "owner", "open_question", "next_check_at", "last_action", "updated_at"])
    return approval


def revoke(req: DeletionRequest, approval: DeletionApproval, *, by: str, reason: str, now: datetime) -> None:
    """The approval no longer covers anything; an unstarted request goes back to submitted,
    a started one is stopped where its next effect lands (the receiver refuses it)."""
    approval.revoked_at = now
    approval.save(update_fields=["revoked_at"])
    fields = ["last_action", "updated_at", "owner", "open_question", "next_check_at"]
    if req.status == Status.APPROVED and not req.stages.exists():
        req.return_to_review()
        fields.append("status")
    req.owner = APPROVERS
    req.open_question = f"approval by {approval.approved_by} revoked by {by}: {reason}; approve again or cancel"
    req.next_check_at = now
    req.last_action = f"approval revoked by {by}"
    req.updated_at = now
    req.save(update_fields=fields)


def latest(req: DeletionRequest) -> DeletionApproval | None:
    return req.approvals.order_by("-approved_at", "-id").first()


def authority_facts(req: DeletionRequest, *, now: datetime, rules_version: int) -> AuthorityFacts:
    """What the receiving boundary rechecks, read inside its transaction, under the request lock."""
    approval = req.approvals.select_related("approved_by_user").order_by("-approved_at", "-id").first()
    requester = _fresh(req.requested_by_user_id)
    approver = _fresh(approval.approved_by_user_id) if approval else None
    return AuthorityFacts(
        now=now,
        status=req.status,
        cancel_requested=req.cancel_requested_at is not None,
        stored_digest=req.inventory_digest,
        recomputed_digest=inventory_digest(req.inventory_json),
        inventory_version=req.inventory_version,
        rules_version=rules_version,
        approval_id=approval.id if approval else None,
        approval_digest=approval.inventory_digest if approval else None,
        approval_inventory_version=approval.inventory_version if approval else None,
        approval_rules_version=approval.rules_version if approval else None,
        approval_expires_at=approval.expires_at if approval else None,
        approval_revoked_at=approval.revoked_at if approval else None,
        approver=approval.approved_by if approval else "",
        approver_may=authority.may(approver, "deletions.approve_deletionrequest"),
        requester=req.requested_by,
        requester_may=authority.may(requester, "deletions.submit_deletionrequest"),
        same_person=requester is not None and approver is not None and requester.pk == approver.pk,
    )


def _fresh(user_id: int | None) -> Any:
    """The user as it is now (active flag, groups): never a cached object."""
    return get_user_model().objects.filter(pk=user_id).first() if user_id is not None else None
