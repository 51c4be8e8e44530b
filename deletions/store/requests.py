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
from deletions.contract import OPERATORS_ON_CALL, Custody
from deletions.errors import Refused
from deletions.models import OPEN_STATUSES, DeletionRequest, StageStatus, Status
from deletions.store import alarms

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
            )
    except IntegrityError:
        existing = DeletionRequest.objects.filter(
            entity_type=entity_type, target=target, status__in=OPEN_STATUSES
        ).first()
        where = f" ({existing.id}, {existing.status})" if existing else ""
        raise Refused(f"an open deletion request already exists for {target}{where}") from None


def record_cancel(req: DeletionRequest, *, by: str, reason: str, now: datetime, outright: bool) -> None:
    """Save a cancellation. With a submission whose outcome is unknown, the case stays open (operators
    on call, checked now) until a worker looks the operation up. Outright: the request ends now
    (completed stages stay done). Otherwise the live worker stops at its next transition, which ends it."""
    req.cancel_requested_at = now
    req.cancel_requested_by = by
    req.cancel_reason = reason
    fields = ["cancel_requested_at", "cancel_requested_by", "cancel_reason", "last_action", "updated_at"]
    unsettled = req.stages.filter(is_current=True, submitted_at__isnull=False).exclude(status=StageStatus.COMPLETED)
    pending = unsettled.values_list("operation_id", "stage").first()
    if pending is not None:
        # An effect may have landed: the case stays open until the operation is looked up.
        op, stage = pending
        if req.status == Status.NEEDS_ATTENTION:
            req.operator_resume()
        if req.status == Status.RETRY_WAIT:
            req.next_attempt_at = now
            fields.append("next_attempt_at")
        req.owner = OPERATORS_ON_CALL
        req.open_question = (
            f"cancellation recorded while operation {op} ({stage}) may have taken effect; the worker looks it up "
            "at the target system before the case closes, and says whether it was applied"
        )
        req.next_check_at = now
        req.last_action = f"cancellation recorded by {by}; operation {op} is being looked up before it ends"
        fields += ["status", "owner", "open_question", "next_check_at"]
    elif outright:
        started = req.stages.exists()
        req.cancel()
        alarms.resolve(request_id=req.id, kind=alarms.EFFECT_UNKNOWN, now=now)  # nothing waits on a person now
        req.next_attempt_at = None
        req.next_check_at = None
        req.open_question = ""
        done = req.stages.filter(status=StageStatus.COMPLETED).count()
        req.last_action = (
            f"cancelled by {by}: {reason}"
            if not started
            else f"cancelled by {by}: {reason}; {done} completed stage(s) stay done"
        )
        fields += ["status", "next_attempt_at", "next_check_at", "open_question"]
    else:
        req.last_action = f"cancellation recorded by {by}; the worker stops at its next transition"
    req.updated_at = now
    req.save(update_fields=fields)


def record_resume(req: DeletionRequest, *, by: str, custody: Custody, now: datetime) -> None:
    """Back to the retry queue, due now, with a fresh failure count (the request is locked)."""
    with connection.cursor() as cur:
        resumed = SQL.one(
            cur,
            "resume",
            request_id=req.id,
            case_owner=custody.owner,
            open_question=custody.open_question,
            next_check_at=custody.next_check_at,
            action=f"resumed by {by}",
            now=now,
        )
    if resumed is None:
        raise ValueError(f"request {req.id} is {req.status}: it cannot be resumed")
