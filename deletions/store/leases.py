"""Claim, heartbeat, release, and owner/generation checks.

Every write is a conditional update on (id, lease_owner, lease_generation);
the row count says whether the caller still owns the request.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID

from django.db import transaction
from django.db.models import F, Q

from deletions.errors import LeaseHeld, Refused, RetryNotDue, StaleLease, UnknownRequest
from deletions.models import RUNNABLE_STATUSES, DeletionApproval, DeletionRequest, Status
from deletions.store.types import Lease


def claim(*, request_id: UUID, owner: str, now: datetime, lease_seconds: int) -> Lease:
    """Take ownership with a new generation; the lifecycle status is preserved."""
    expires = now + timedelta(seconds=lease_seconds)
    with transaction.atomic():
        claimable = (
            Q(id=request_id, status__in=RUNNABLE_STATUSES, cancel_requested_at__isnull=True)
            & (Q(lease_owner__isnull=True) | Q(lease_expires_at__lte=now))
            & ~Q(status=Status.RETRY_WAIT, next_attempt_at__gt=now)
        )
        updated = DeletionRequest.objects.filter(claimable).update(
            lease_owner=owner,
            lease_generation=F("lease_generation") + 1,
            lease_expires_at=expires,
            heartbeat_at=now,
            updated_at=now,
        )
        if updated == 1:
            generation = DeletionRequest.objects.values_list("lease_generation", flat=True).get(id=request_id)
            return Lease(request_id=request_id, owner=owner, generation=generation, expires_at=expires)
    raise _claim_refusal(request_id, now)


def _claim_refusal(request_id: UUID, now: datetime) -> Exception:
    req = DeletionRequest.objects.filter(id=request_id).first()
    if req is None:
        return UnknownRequest(f"no deletion request with id {request_id}")
    if req.status == Status.SUBMITTED:
        return Refused(f"request {req.id} is not approved (status submitted)")
    if req.cancel_requested_at is not None or req.status == Status.CANCELLED:
        return Refused(f"request {req.id} is cancelled (by {req.cancel_requested_by or 'an operator'})")
    if req.status == Status.NEEDS_ATTENTION:
        return Refused(f"request {req.id} needs attention after {req.retry_count} failures; an operator must resume it")
    if req.status == Status.RETRY_WAIT and req.next_attempt_at and req.next_attempt_at > now:
        return RetryNotDue(f"retry of request {req.id} is not due until {req.next_attempt_at.isoformat()}")
    if req.lease_owner is not None and req.lease_expires_at and req.lease_expires_at > now:
        return LeaseHeld(
            f"request {req.id} is leased by {req.lease_owner} (generation {req.lease_generation}) "
            f"until {req.lease_expires_at.isoformat()}"
        )
    return Refused(f"request {req.id} cannot be claimed in status {req.status}")


def heartbeat(lease: Lease, *, now: datetime, lease_seconds: int) -> bool:
    """Renew the lease; False when the caller no longer owns it."""
    return (
        DeletionRequest.objects.filter(
            id=lease.request_id, lease_owner=lease.owner, lease_generation=lease.generation
        ).update(heartbeat_at=now, lease_expires_at=now + timedelta(seconds=lease_seconds))
        == 1
    )


def release(lease: Lease, *, now: datetime) -> bool:
    """Give up ownership; False when a newer owner already holds the request."""
    return (
        DeletionRequest.objects.filter(
            id=lease.request_id, lease_owner=lease.owner, lease_generation=lease.generation
        ).update(lease_owner=None, lease_expires_at=None, updated_at=now)
        == 1
    )


def lock_owned(lease: Lease) -> DeletionRequest:
    """Lock the parent row and check owner + generation; call inside atomic()."""
    req = DeletionRequest.objects.select_for_update().filter(id=lease.request_id).first()
    if req is None:
        raise UnknownRequest(f"no deletion request with id {lease.request_id}")
    if req.lease_owner != lease.owner or req.lease_generation != lease.generation:
        raise StaleLease(
            f"lease of {lease.owner} generation {lease.generation} is stale: request {req.id} is held by "
            f"{req.lease_owner or 'nobody'} generation {req.lease_generation}"
        )
    return req


def latest_approval(request_id: UUID) -> DeletionApproval | None:
    return DeletionApproval.objects.filter(request_id=request_id).order_by("-approved_at").first()
