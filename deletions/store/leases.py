"""Claim, heartbeat, release, and owner/generation checks.

Every write is a conditional update on (id, lease_owner, lease_generation);
the row count says whether the caller still owns the request.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import connection, transaction

from core import present
from core.errors import DomainError
from core.logs import event
from core.sql import Statements
from deletions.contract import Lease
from deletions.errors import LeaseHeld, Refused, RetryNotDue, StaleLease, UnknownRequest
from deletions.models import RUNNABLE_STATUSES, DeletionRequest, Status

logger = logging.getLogger("deletions")
SQL = Statements.beside(__file__, "leases.sql")


def claim(*, request_id: UUID, owner: str, now: datetime, lease_seconds: int, past: int = 0) -> Lease:
    """Take ownership with a new generation, above the saved one and above `past` (the target
    system's fence: after the case database was restored from a backup, the saved generation
    may be one the target already saw); the lifecycle status is preserved.

    A cancellation recorded while running does not block the claim: the first
    transition of the new owner finishes the request as cancelled.
    """
    expires = now + timedelta(seconds=lease_seconds)
    with transaction.atomic(), connection.cursor() as cur:  # every run starts here: two statements
        row = SQL.one(cur, "lock_for_claim", request_id=request_id)
        previous = dict(zip(_CLAIM_COLUMNS, row, strict=True)) if row is not None else None
        if previous is not None and _claimable(previous, now):
            generation = max(previous["lease_generation"], past) + 1  # the row is locked: no one else moves it
            takeover = previous["lease_owner"] is not None
            SQL.one(
                cur,
                "claim",
                request_id=request_id,
                owner=owner,
                generation=generation,
                previous=previous["lease_generation"],
                expires=expires,
                now=now,
                event="takeover" if takeover else "claim",
                previous_owner=previous["lease_owner"],
                previous_expires_at=previous["lease_expires_at"],
            )
            event(
                logger,
                "takeover" if takeover else "claim",
                request_id=request_id,
                executor=owner,
                generation=generation,
                reason=_claim_reason(previous, past, takeover),
            )
            return Lease(request_id=request_id, owner=owner, generation=generation, expires_at=expires)
    refusal = _claim_refusal(request_id, now)
    event(logger, "refusal", request_id=request_id, executor=owner, reason=refusal.message)
    raise refusal


def _claim_reason(previous: Mapping[str, Any], past: int, takeover: bool) -> str | None:
    said = [f"previous owner {previous['lease_owner']}"] if takeover else []
    if past > previous["lease_generation"]:
        said.append(f"moved past the target system's fence {past} (saved generation {previous['lease_generation']})")
    return "; ".join(said) or None


_CLAIM_COLUMNS = (
    "status",
    "lease_owner",
    "lease_expires_at",
    "lease_generation",
    "next_attempt_at",
    "cancel_requested_at",
)


def _claimable(row: Mapping[str, Any], now: datetime) -> bool:
    """Runnable, not leased (or the lease ran out), not waiting for a retry, not cancelled before it started."""
    return (
        row["status"] in RUNNABLE_STATUSES
        and (row["lease_owner"] is None or row["lease_expires_at"] <= now)
        and not (row["status"] == Status.RETRY_WAIT and row["next_attempt_at"] and row["next_attempt_at"] > now)
        and not (row["status"] == Status.APPROVED and row["cancel_requested_at"] is not None)
    )


def _claim_refusal(request_id: UUID, now: datetime) -> DomainError:
    req = DeletionRequest.objects.filter(id=request_id).first()
    if req is None:
        return UnknownRequest(f"no deletion request with id {request_id}")
    if req.status == Status.SUBMITTED:
        return Refused(f"request {req.id} is not approved (status submitted)")
    if req.status == Status.CANCELLED or (req.status == Status.APPROVED and req.cancel_requested_at is not None):
        return Refused(f"request {req.id} is cancelled (its decision log says by whom)")
    if req.status == Status.NEEDS_ATTENTION:
        return Refused(f"request {req.id} needs attention after {req.retry_count} failures; an operator must resume it")
    if req.status == Status.RETRY_WAIT and req.next_attempt_at and req.next_attempt_at > now:
        return RetryNotDue(f"retry of request {req.id} is not due until {present.absolute(req.next_attempt_at)}")
    if req.lease_owner is not None and req.lease_expires_at and req.lease_expires_at > now:
        return LeaseHeld(
            f"request {req.id} is leased by {req.lease_owner} (generation {req.lease_generation}) "
            f"until {present.absolute(req.lease_expires_at)}"
        )
    return Refused(f"request {req.id} cannot be claimed in status {req.status}")


def heartbeat(lease: Lease, *, now: datetime, lease_seconds: int) -> bool:
    """Renew the lease; False when the caller no longer owns it."""
    expires = now + timedelta(seconds=lease_seconds)
    with connection.cursor() as cur:
        return SQL.run(cur, "heartbeat", **_fenced(lease), now=now, expires=expires) == 1


def release(lease: Lease, *, now: datetime) -> bool:
    """Give up ownership; False when a newer owner already holds the request."""
    with transaction.atomic(), connection.cursor() as cur:
        released = SQL.one(cur, "release", **_fenced(lease), now=now) is not None
    event(
        logger,
        "release" if released else "refusal",
        request_id=lease.request_id,
        executor=lease.owner,
        generation=lease.generation,
        reason=None if released else "release of a stale lease",
    )
    return released


def _fenced(lease: Lease) -> dict[str, Any]:
    return {"request_id": lease.request_id, "owner": lease.owner, "generation": lease.generation}


def check_owner(lease: Lease, owner: str | None, generation: int) -> None:
    """Refuse unless the locked row is still held by this lease (owner and generation)."""
    if owner != lease.owner or generation != lease.generation:
        raise StaleLease(
            f"lease of {lease.owner} generation {lease.generation} is stale: request {lease.request_id} is held by "
            f"{owner or 'nobody'} generation {generation}"
        )
