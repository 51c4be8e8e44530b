"""Inventory fingerprints, insertion, and the staff decisions' writes on a request."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import IntegrityError, connection, transaction

from core.sql import Statements
from core.store import lock_or_not_found
from deletions.contract import CancelPlan, Custody
from deletions.errors import AlreadyOpen, Refused
from deletions.models import OPEN_STATUSES, DeletionRequest, Status

SQL = Statements.beside(__file__, "requests.sql")


def inventory_digest(inventory: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON form: the fingerprint an approval covers."""
    canonical = json.dumps(inventory, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def lock_request(request_id: UUID) -> DeletionRequest:
    """Lock the request row (inside atomic()) or refuse: the first step of every staff decision."""
    return lock_or_not_found(DeletionRequest.objects.all(), request_id, "deletion request")


def insert_request(
    *,
    entity_type: str,
    target: str,
    requested_by: Any,
    inventory: dict[str, Any],
    version: int,
    custody: Custody,
    received_at: datetime,
    due_at: datetime,
    now: datetime,
) -> DeletionRequest:
    """Insert a submitted request; refuse a second open request for the target."""
    try:
        with transaction.atomic():
            if DeletionRequest.objects.filter(
                entity_type=entity_type, target=target, status__in=OPEN_STATUSES
            ).exists():
                raise IntegrityError("open request exists")
            return DeletionRequest.objects.create(
                entity_type=entity_type,
                target=target,
                requested_by=requested_by.get_username(),
                requested_by_user=requested_by,
                inventory_json=inventory,
                inventory_version=version,
                inventory_digest=inventory_digest(inventory),
                status=Status.SUBMITTED,
                owner=custody.owner,
                open_question=custody.open_question,
                next_check_at=custody.next_check_at,
                last_action=f"submitted by {requested_by.get_username()}",
                created_at=now,
                updated_at=now,
                received_at=received_at,
                due_at=due_at,
            )
    except IntegrityError:
        existing = DeletionRequest.objects.filter(
            entity_type=entity_type, target=target, status__in=OPEN_STATUSES
        ).first()
        where = f" ({existing.id}, {existing.status})" if existing else ""
        raise AlreadyOpen(f"an open deletion request already exists for {target}{where}") from None


def record_cancel(request_id: UUID, plan: CancelPlan, *, by: str, reason: str, now: datetime) -> None:
    """Save a cancellation as policy planned it (`rules.custody.cancel`; the request is locked)."""
    with connection.cursor() as cur:
        if plan.ends_now:
            done = SQL.one(
                cur, "cancel_outright", request_id=request_id, by=by, reason=reason, action=plan.action, now=now
            )
        else:
            c = plan.custody
            done = SQL.one(
                cur,
                "cancel_recorded",
                request_id=request_id,
                by=by,
                reason=reason,
                action=plan.action,
                settles=c is not None,
                case_owner=c.owner if c else "",
                open_question=c.open_question if c else "",
                next_check_at=c.next_check_at if c else None,
                now=now,
            )
    if done is None:
        raise Refused(f"request {request_id} is finished or its cancellation was already recorded")


def record_resume(req: DeletionRequest, *, by: str, custody: Custody, now: datetime) -> None:
    """Back to the retry queue, due now, with a fresh failure count (the request is locked)."""
    with connection.cursor() as cur:
        resumed = SQL.one(cur, "resume", **_held(req, custody, action=f"resumed by {by}", now=now))
    if resumed is None:
        raise ValueError(f"request {req.id} is {req.status}: it cannot be resumed")


def review_recorded_effect(req: DeletionRequest, *, custody: Custody, action: str, now: datetime) -> None:
    """The case stays stopped for review (the request is locked): see the statement."""
    with connection.cursor() as cur:
        done = SQL.one(cur, "review_recorded_effect", **_held(req, custody, action=action, now=now))
    if done is None:
        raise ValueError(f"request {req.id} is {req.status}: it is not waiting for a recorded effect")


def _held(req: DeletionRequest, custody: Custody, *, action: str, now: datetime) -> dict[str, Any]:
    """The parameters of a statement that sets who holds the request, what it asks and when it is
    looked at next (`custody`), with its last action."""
    return {
        "request_id": req.id,
        "case_owner": custody.owner,
        "open_question": custody.open_question,
        "next_check_at": custody.next_check_at,
        "action": action,
        "now": now,
    }


def assign(
    request_id: UUID, *, status: str, was: str, key: str, person: int | None, backup: int | None, now: datetime
) -> bool:
    """Name the person and backup for `key` (see the `assign` statement); False when the case moved
    on or was named by someone else since it was read."""
    with connection.cursor() as cur:
        return (
            SQL.one(
                cur,
                "assign",
                request_id=request_id,
                status=status,
                was=was,
                key=key,
                person=person,
                backup=backup,
                now=now,
            )
            is not None
        )


def extend_deadline(request_id: UUID, *, was: datetime, due_at: datetime, action: str, now: datetime) -> None:
    with connection.cursor() as cur:
        done = SQL.one(cur, "extend_deadline", request_id=request_id, was=was, due_at=due_at, action=action, now=now)
    if done is None:
        raise Refused(f"request {request_id} is finished, or its deadline moved since it was read")
