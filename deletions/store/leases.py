"""Claim, heartbeat, release, and owner/generation checks.

A claim is one statement that takes the request only when it is claimable (the caller explains
a refusal from the row: `claim_refusal`); every later write is a conditional update on
(id, lease_owner, lease_generation), and the row count says whether the caller still owns it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import connection

from core import present
from core.errors import DomainError
from core.logs import event
from core.sql import Statements
from deletions.contract import Lease
from deletions.errors import (
    AlreadyCompleted,
    ApprovalExpired,
    LeaseHeld,
    Refused,
    RetryNotDue,
    StaleLease,
    UnknownRequest,
)
from deletions.models import LATEST_APPROVAL_FIRST, LATEST_APPROVAL_SQL, RUNNABLE_STATUSES, DeletionRequest, Status
from deletions.store.requests import inventory_digest

logger = logging.getLogger("deletions")
SQL = Statements.beside(__file__, "leases.sql")


@dataclass(frozen=True)
class Claimed:
    """A claim and what its run reads under it: the request's status and approved inventory, with
    the inventory's digest recomputed from what was read (each grant compares it with the saved one)."""

    lease: Lease
    status: str
    inventory: dict[str, Any]
    inventory_version: int
    digest: str
    target: str


def claim(*, request_id: UUID, owner: str, now: datetime, lease_seconds: int, past: int = 0) -> Lease:
    """Take ownership with a new generation (see `claim_run`)."""
    return claim_run(request_id=request_id, owner=owner, now=now, lease_seconds=lease_seconds, past=past).lease


def claim_run(*, request_id: UUID, owner: str, now: datetime, lease_seconds: int, past: int = 0) -> Claimed:
    """Take ownership with a new generation, above the saved one and above `past` (the target
    system's fence: after the case database was restored from a backup, the saved generation
    may be one the target already saw); the lifecycle status is preserved. One statement (every
    run starts here): the locked row, the claim, its lease event and the run's read.

    A cancellation recorded while running does not block the claim: the first
    transition of the new owner finishes the request as cancelled.
    """
    expires = now + timedelta(seconds=lease_seconds)
    with connection.cursor() as cur:  # one statement: its own transaction
        cur.execute(
            claim_sql(),
            dict(
                request_id=request_id,
                owner=owner,
                past=past,
                expires=expires,
                now=now,
                runnable=[str(s) for s in RUNNABLE_STATUSES],
            ),
        )
        row = cur.fetchone()
    if row is None:
        refusal = claim_refusal(request_id, now)
        event(logger, "refusal", request_id=request_id, executor=owner, reason=refusal.message)
        raise refusal
    generation, saved, previous_owner, status, inventory, version, target = row
    takeover = previous_owner is not None
    said = [f"previous owner {previous_owner}"] if takeover else []
    if past > saved:
        said.append(f"moved past the target system's fence {past} (saved generation {saved})")
    event(
        logger,
        "takeover" if takeover else "claim",
        request_id=request_id,
        executor=owner,
        generation=generation,
        reason="; ".join(said) or None,
    )
    lease = Lease(request_id=request_id, owner=owner, generation=generation, expires_at=expires)
    read = json.loads(inventory) if isinstance(inventory, str) else inventory
    return Claimed(lease, status, read, version, inventory_digest(read), target)


def claim_sql() -> str:
    """The `claim` statement, the latest approval's order filled in (`models.LATEST_APPROVAL_SQL`)."""
    return SQL.sql("claim").format(latest_approval=LATEST_APPROVAL_SQL)


def claim_refusal(request_id: UUID, now: datetime) -> DomainError:
    """Why the request is not claimable now, read from its row (also what a run says of a completed
    request or an expired approval when its target does not answer)."""
    req = DeletionRequest.objects.filter(id=request_id).first()
    if req is None:
        return UnknownRequest(f"no deletion request with id {request_id}")
    if req.status == Status.COMPLETED:
        return AlreadyCompleted(
            f"request {req.id} already completed at {present.absolute(req.completed_at)}; nothing changed"
        )
    if req.status == Status.APPROVED:
        approval = req.approvals.order_by(*LATEST_APPROVAL_FIRST).first()  # (`approvals.latest`)
        if approval is not None and approval.expires_at is not None and approval.expires_at <= now:
            return ApprovalExpired(
                f"the approval of request {req.id} expired at {present.absolute(approval.expires_at)}",
                approval.expires_at,
            )
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
    with connection.cursor() as cur:  # one statement: its own transaction
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
