"""User-deletion services: one function per state change, called by commands and admin."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction

from deletions import clock, target_system, tasks
from deletions.errors import BadInput, Refused, UnknownRequest
from deletions.models import TERMINAL_STATUSES, DeletionApproval, DeletionRequest, StageHistory, Status
from deletions.store import approvals, decisions
from deletions.store.requests import get_request, insert_request, parse_request_id
from deletions.users import inventory, workflow
from deletions.users.handlers import RunOptions

HEX = set("0123456789abcdef")


def _actor(name: str, role: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > 150 or not name.isprintable():
        raise BadInput(f"{role} {name!r} is refused: give an operator name of 1-150 printable characters")
    return name


def deletion_submit(*, target: str, requested_by: str) -> DeletionRequest:
    requested_by = _actor(requested_by, "requested-by")
    inventory.validate_target(target)
    inv = inventory.build_inventory(target)
    inventory.validate_inventory(inv)
    now = clock.now()
    with transaction.atomic():
        req = insert_request(
            entity_type="user",
            target=target,
            requested_by=requested_by,
            inventory=inv,
            version=inventory.INVENTORY_VERSION,
            now=now,
        )
        decisions.record(request_id=req.id, actor=requested_by, action="submit", reason="", now=now)
        return req


def deletion_approve(*, request_id: str | UUID, approved_by: str, digest: str) -> DeletionApproval:
    rid = parse_request_id(request_id)
    approved_by = _actor(approved_by, "approved-by")
    digest = (digest or "").strip().lower()
    if len(digest) != 64 or not set(digest) <= HEX:
        raise BadInput(f"inventory digest {digest!r} is refused: expected 64 hexadecimal characters")
    now = clock.now()
    with transaction.atomic():
        approval = approvals.approve(
            request_id=rid,
            approved_by=approved_by,
            digest=digest,
            validate_inventory=inventory.validate_inventory,
            now=now,
            ttl=timedelta(days=settings.DELETION_APPROVAL_TTL_DAYS),
        )
        decisions.record(request_id=rid, actor=approved_by, action="approve", reason=f"digest {digest}", now=now)
        transaction.on_commit(lambda: tasks.enqueue_run(rid))
        return approval


def deletion_cancel(*, request_id: str | UUID, cancelled_by: str, reason: str) -> DeletionRequest:
    """Before the first stage: cancel outright. Once running: record it; the worker
    stops at its next transition and completed stages stay done."""
    rid = parse_request_id(request_id)
    cancelled_by = _actor(cancelled_by, "by")
    reason = (reason or "").strip()
    if not reason:
        raise BadInput("a cancellation needs a reason")
    now = clock.now()
    with transaction.atomic():
        req = DeletionRequest.objects.select_for_update().filter(id=rid).first()
        if req is None:
            raise UnknownRequest(f"no deletion request with id {rid}")
        if req.status in TERMINAL_STATUSES:
            raise Refused(f"request {req.id} is already {req.status}; nothing to cancel")
        if req.cancel_requested_at is not None:
            raise Refused(f"cancellation of request {req.id} was already recorded by {req.cancel_requested_by}")
        req.cancel_requested_at = now
        req.cancel_requested_by = cancelled_by
        req.cancel_reason = reason
        fields = ["cancel_requested_at", "cancel_requested_by", "cancel_reason", "last_action", "updated_at"]
        worker_live = req.lease_owner is not None and req.lease_expires_at is not None and req.lease_expires_at > now
        started = req.stages.exists()
        if worker_live:
            req.last_action = f"cancellation recorded by {cancelled_by}; the worker stops at its next transition"
        else:
            req.cancel()
            req.next_attempt_at = None
            req.next_check_at = None
            req.open_question = ""
            done = req.stages.filter(status="completed").count()
            req.last_action = (
                f"cancelled by {cancelled_by}: {reason}"
                if not started
                else f"cancelled by {cancelled_by}: {reason}; {done} completed stage(s) stay done"
            )
            fields += ["status", "next_attempt_at", "next_check_at", "open_question"]
        req.updated_at = now
        req.save(update_fields=fields)
        decisions.record(request_id=req.id, actor=cancelled_by, action="cancel", reason=reason, now=now)
        return req


def deletion_resume(
    *, request_id: str | UUID, resumed_by: str, reason: str = "", effect_not_applied: bool = False
) -> DeletionRequest:
    """An operator sends a stopped request back to the retry queue, due now.

    With `effect_not_applied` the operator also settles an unknown effect: they
    confirm the target system never applied the current stage's operation, which
    allows the next attempt to submit it (under the same operation id).
    """
    rid = parse_request_id(request_id)
    resumed_by = _actor(resumed_by, "by")
    now = clock.now()
    with transaction.atomic():
        req = DeletionRequest.objects.select_for_update().filter(id=rid).first()
        if req is None:
            raise UnknownRequest(f"no deletion request with id {rid}")
        resumable = [Status.NEEDS_ATTENTION, *([Status.RETRY_WAIT] if effect_not_applied else [])]
        if req.status not in resumable:
            raise Refused(f"request {req.id} is {req.status}; only a request that needs attention can be resumed")
        if effect_not_applied:
            row = StageHistory.objects.select_for_update().filter(request=req, is_current=True).first()
            if row is None or row.submitted_at is None:
                raise Refused(f"request {req.id}: the current stage submitted nothing, so no effect is unknown")
            if target_system.lookup(row.operation_id) is not None:
                raise Refused(
                    f"the target system has a record of operation {row.operation_id}: it was applied; nothing to resend"
                )
            row.submitted_at = None
            row.save(update_fields=["submitted_at"])
            decisions.record(
                request_id=req.id,
                actor=resumed_by,
                action="confirm_not_applied",
                reason=reason or f"operation {row.operation_id} confirmed not applied",
                now=now,
            )
        if req.status == Status.NEEDS_ATTENTION:
            req.operator_resume()
        req.retry_count = 0
        req.next_attempt_at = now
        req.next_check_at = now
        req.open_question = ""
        req.owner = resumed_by
        req.last_action = f"resumed by {resumed_by}"
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
        decisions.record(request_id=req.id, actor=resumed_by, action="resume", reason=reason, now=now)
        return req


def deletion_run_now(*, request_id: str | UUID, requested_by: str) -> DeletionRequest:
    """Enqueue a worker run on commit; the lease, not the queue, decides who executes."""
    rid = parse_request_id(request_id)
    requested_by = _actor(requested_by, "by")
    now = clock.now()
    with transaction.atomic():
        req = DeletionRequest.objects.select_for_update().filter(id=rid).first()
        if req is None:
            raise UnknownRequest(f"no deletion request with id {rid}")
        if req.status not in (Status.APPROVED, Status.RUNNING, Status.RETRY_WAIT):
            raise Refused(f"request {req.id} is {req.status}; only an approved, running or retrying request can run")
        decisions.record(request_id=req.id, actor=requested_by, action="run_now", reason="", now=now)
        transaction.on_commit(lambda: tasks.enqueue_run(rid))
        return req


def run_options(
    *, request_id: str | UUID, fail_stage: str | None, no_agents_in: list[str], stage_delay_ms: int
) -> RunOptions:
    """Validate run flags against the rules and the request's inventory before any write."""
    req = get_request(request_id)
    if fail_stage is not None and fail_stage not in workflow.STAGES:
        raise BadInput(f"--fail-stage {fail_stage!r} is not a stage ({', '.join(workflow.STAGES)})")
    known = inventory.community_ids(req.inventory_json)
    for cid in no_agents_in:
        if cid not in known:
            raise BadInput(
                f"--demo-no-agents-in {cid} is not a community of this request's inventory ({', '.join(known)})"
            )
    if stage_delay_ms < 0:
        raise BadInput(f"--stage-delay-ms {stage_delay_ms} must not be negative")
    return RunOptions(no_agents_in=frozenset(no_agents_in), fail_stage=fail_stage, stage_delay_ms=stage_delay_ms)


def submission_json(req: DeletionRequest) -> dict[str, Any]:
    return {
        "id": str(req.id),
        "status": req.status,
        "target": req.target,
        "requested_by": req.requested_by,
        "inventory": req.inventory_json,
        "inventory_digest": req.inventory_digest,
    }
