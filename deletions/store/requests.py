"""Read, list and inspect requests; inventory fingerprints; insertion; the staff decisions' writes."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import IntegrityError, transaction

from core.store import lock_or_not_found, parse_id
from deletions.contract import APPROVERS, StageSnapshot, chain_order
from deletions.errors import Refused, UnknownRequest
from deletions.models import OPEN_STATUSES, DeletionRequest, StageHistory, StageStatus, Status
from deletions.store import alarms


def inventory_digest(inventory: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON form: the fingerprint an approval covers."""
    canonical = json.dumps(inventory, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def parse_request_id(raw: str | UUID) -> UUID:
    return parse_id(raw)


def get_request(request_id: str | UUID) -> DeletionRequest:
    rid = parse_request_id(request_id)
    try:
        return DeletionRequest.objects.get(id=rid)
    except DeletionRequest.DoesNotExist:
        raise UnknownRequest(f"no deletion request with id {rid}") from None


def lock_request(request_id: UUID) -> DeletionRequest:
    """Lock the request row (inside atomic()) or refuse: the first step of every staff decision."""
    return lock_or_not_found(DeletionRequest.objects.all(), request_id, "deletion request")


def insert_request(
    *, entity_type: str, target: str, requested_by: Any, inventory: dict[str, Any], version: int, now: datetime
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
                owner=APPROVERS,  # waiting for approval: never the submitter
                open_question="waiting for a second operator to approve the inventory",
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
    """Save a cancellation. Outright: the request ends now (completed stages stay done).
    Otherwise the live worker stops at its next transition, which ends it."""
    req.cancel_requested_at = now
    req.cancel_requested_by = by
    req.cancel_reason = reason
    fields = ["cancel_requested_at", "cancel_requested_by", "cancel_reason", "last_action", "updated_at"]
    if outright:
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


def record_resume(req: DeletionRequest, *, by: str, now: datetime) -> None:
    """Back to the retry queue, due now, with a fresh failure count."""
    if req.status == Status.NEEDS_ATTENTION:
        req.operator_resume()
    req.retry_count = 0
    req.next_attempt_at = now
    req.next_check_at = now
    req.open_question = ""
    req.owner = by
    req.last_action = f"resumed by {by}"
    req.updated_at = now
    req.save(
        update_fields=[
            "status",
            "retry_count",
            "next_attempt_at",
            "next_check_at",
            "open_question",
            "owner",
            "last_action",
            "updated_at",
        ]
    )


def stage_snapshot(row: StageHistory) -> StageSnapshot:
    return StageSnapshot(
        id=row.id,
        stage=row.stage,
        community_id=str(row.target_community_id) if row.target_community_id else None,
        status=row.status,
        is_current=row.is_current,
        metadata=row.metadata_json or {},
        started_at=row.started_at,
        finished_at=row.finished_at,
        last_error=row.last_error,
        operation_id=row.operation_id,
        attempts=row.attempts,
        submitted_at=row.submitted_at,
    )


def load_history(request_id: UUID, limit: int) -> list[StageSnapshot]:
    """At most `limit` + 1 rows, so a caller can tell the bound was exceeded."""
    rows = StageHistory.objects.filter(request_id=request_id).order_by("created_at", "id")[: limit + 1]
    return [stage_snapshot(r) for r in rows]


def inspect(request_id: str | UUID) -> dict[str, Any]:
    """Request, approvals and stage chain (in previous_stage_id order) as plain data."""
    req = get_request(request_id)
    approvals = list(req.approvals.order_by("approved_at", "id"))
    rows = [stage_snapshot(r) for r in StageHistory.objects.filter(request=req).order_by("created_at", "id")]
    return {
        "request": {
            "id": str(req.id),
            "entity_type": req.entity_type,
            "target": req.target,
            "requested_by": req.requested_by,
            "status": req.status,
            "inventory": req.inventory_json,
            "inventory_version": req.inventory_version,
            "inventory_digest": req.inventory_digest,
            "lease_owner": req.lease_owner,
            "lease_generation": req.lease_generation,
            "lease_expires_at": _iso(req.lease_expires_at),
            "heartbeat_at": _iso(req.heartbeat_at),
            "retry_count": req.retry_count,
            "next_attempt_at": _iso(req.next_attempt_at),
            "last_error": req.last_error,
            "completed_at": _iso(req.completed_at),
            "created_at": _iso(req.created_at),
            "updated_at": _iso(req.updated_at),
            "owner": req.owner,
            "next_check_at": _iso(req.next_check_at),
            "open_question": req.open_question,
            "last_action": req.last_action,
            "cancel_requested_at": _iso(req.cancel_requested_at),
            "cancel_requested_by": req.cancel_requested_by,
            "cancel_reason": req.cancel_reason,
        },
        "approvals": [
            {
                "approved_by": a.approved_by,
                "approved_at": _iso(a.approved_at),
                "inventory_digest": a.inventory_digest,
                "expires_at": _iso(a.expires_at),
                "revoked_at": _iso(a.revoked_at),
            }
            for a in approvals
        ],
        "stages": [
            {
                "id": str(s.id),
                "stage": s.stage,
                "target_community_id": s.community_id,
                "status": s.status,
                "is_current": s.is_current,
                "started_at": _iso(s.started_at),
                "finished_at": _iso(s.finished_at),
                "operation_id": str(s.operation_id),
                "submitted_at": _iso(s.submitted_at),
                "attempts": s.attempts,
                "metadata_json": s.metadata,
                "last_error": s.last_error,
            }
            for s in chain_order(rows)
        ],
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
