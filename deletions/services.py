"""User-deletion services: one function per staff decision, called by the admin and the commands.

Each takes the acting `Actor`, checks the action's permission itself, validates
its input before any write, locks the request, refuses with the rule's name,
asks the store to write, logs the decision and enqueues work on commit.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction

from core import authority, clock, present
from core.authority import Actor
from core.errors import optional_reason, required_reason, shown
from deletions import jobs, proposal, targets, withdrawals
from deletions.case import cannot_run_now
from deletions.errors import BadInput, Refused
from deletions.handlers import RunOptions
from deletions.models import TERMINAL_STATUSES, DeletionApproval, DeletionRequest, Status
from deletions.rules import custody, inventory, workflow
from deletions.selectors import cancel_facts, get_request, parse_request_id
from deletions.store import alarms, approvals, decisions, stages
from deletions.store.requests import (
    insert_request,
    inventory_digest,
    lock_request,
    record_cancel,
    record_resume,
)
from deletions.store.withdrawals import withdraw
from deletions.targets.base import Found, TargetRefused, inconclusive, supervised

HEX = set("0123456789abcdef")
MAX_STAGE_DELAY_MS = 3_600_000  # an hour: far past the lease, enough for any demo
SUBMIT = "deletions.submit_deletionrequest"
APPROVE = "deletions.approve_deletionrequest"
CANCEL = "deletions.cancel_deletionrequest"
RUN = "deletions.run_deletionrequest"


def deletion_submit(
    *, actor: Actor, target: str, reason: str = "", communities: int = inventory.DEMO_COMMUNITIES
) -> DeletionRequest:
    authority.require(actor, SUBMIT)
    reason = optional_reason(reason)
    inv = deletion_inventory(target, communities)
    now = clock.now()
    with transaction.atomic():
        req = insert_request(
            entity_type="user",
            target=target,
            requested_by=actor.user,
            inventory=inv,
            version=inventory.INVENTORY_VERSION,
            custody=custody.submitted(),
            now=now,
        )
        decisions.record(request_id=req.id, actor=actor, action="submit", reason=reason, now=now)
        return req


def deletion_inventory(target: str, communities: int = inventory.DEMO_COMMUNITIES) -> dict[str, Any]:
    """The inventory a submission would propose: the person's communities as the target system lists them."""
    inventory.validate_target(target)
    inventory.check_community_count(communities)
    inv = inventory.build_inventory(target, targets.for_target(target).inventory(target, communities))
    inventory.validate_inventory(inv)
    return inv


def deletion_approve(*, actor: Actor, request_id: str | UUID, digest: str) -> DeletionApproval:
    """Four eyes on the exact inventory: a second operator approves the digest they saw."""
    rid = parse_request_id(request_id)
    authority.require(actor, APPROVE)
    digest = (digest or "").strip().lower()
    if len(digest) != 64 or not set(digest) <= HEX:
        raise BadInput(f"inventory digest {shown(digest)} is refused: expected 64 hexadecimal characters")
    now = clock.now()
    with transaction.atomic():
        req = lock_request(rid)
        if req.status not in (Status.SUBMITTED, Status.NEEDS_REVIEW):
            previous = approvals.latest(req)
            by = (
                f" (approved by {previous.approved_by} at {present.absolute(previous.approved_at)})" if previous else ""
            )
            raise Refused(f"request {req.id} is {req.status}, not submitted: it cannot be approved again{by}")
        if submitted_by(req, actor):
            raise Refused(
                f"four eyes: {actor.name} submitted request {req.id} and cannot approve it; "
                "a second operator must approve"
            )
        recomputed = inventory_digest(req.inventory_json)
        if recomputed != req.inventory_digest:
            raise Refused(f"saved inventory digest {req.inventory_digest} does not match its inventory {recomputed}")
        if digest != req.inventory_digest:
            raise Refused(f"approval digest {digest} does not match inventory {req.inventory_digest}")
        inventory.validate_inventory(req.inventory_json)
        seen = proposal.of_request(req)  # read from the target now: what this approval covers
        missing = [c.community_id for c in seen.communities if c.version is None]
        if missing:
            raise Refused(
                f"the target system lists no membership of {req.target} in {len(missing)} of the inventory's "
                f"communities ({', '.join(missing[:3])}); the inventory no longer matches it and cannot be approved"
            )
        approval = approvals.save_approval(
            req,
            approved_by=actor.user,
            digest=digest,
            rules_version=workflow.RULES_VERSION,
            now=now,
            ttl=timedelta(days=settings.DELETION_APPROVAL_TTL_DAYS),
            custody=custody.approved(now),
            preview=proposal.saved(seen),
        )
        # The approvers answered a refusal at the target: its alarm clears (a new refusal raises it again).
        alarms.resolve(request_id=rid, kind=alarms.BOUNDARY_REFUSED, now=now)
        decisions.record(
            request_id=rid, actor=actor, action="approve", reason=f"digest {digest}", now=now, approval=approval
        )
        transaction.on_commit(lambda: jobs.enqueue_run(rid))
        return approval


def submitted_by(req: DeletionRequest, actor: Actor) -> bool:
    """Four eyes compares people: the linked user, or (rows from before users were linked) the name in any case."""
    if req.requested_by_user_id is not None:
        return bool(req.requested_by_user_id == actor.user.pk)
    return req.requested_by.casefold() == actor.name.casefold()


def deletion_cancel(*, actor: Actor, request_id: str | UUID, reason: str) -> DeletionRequest:
    """Nothing running and nothing submitted unsettled: cancel outright (completed stages stay done).
    A live worker: record it; the worker stops at its next transition. A submission whose outcome is
    unknown: record it and keep the case open until a worker has looked the operation up."""
    rid = parse_request_id(request_id)
    authority.require(actor, CANCEL)
    reason = required_reason(reason, "cancel a deletion")
    now = clock.now()
    with transaction.atomic():
        req = lock_request(rid)
        if req.status in TERMINAL_STATUSES:
            raise Refused(f"request {req.id} is already {req.status}; nothing to cancel")
        if req.cancel_requested_at is not None:
            raise Refused(f"cancellation of request {req.id} was already recorded by {req.cancel_requested_by}")
        plan = custody.cancel(cancel_facts(req, now), by=actor.name, reason=reason, now=now)
        record_cancel(req.id, plan, by=actor.name, reason=reason, now=now)
        _withdraw(req.id, cause=f"request cancelled by {actor.name}", now=now)
        req.refresh_from_db()
        decisions.record(
            request_id=req.id, actor=actor, action="cancel", reason=reason, now=now, approval=approvals.latest(req)
        )
        return req


def deletion_resume(
    *, actor: Actor, request_id: str | UUID, reason: str = "", effect_not_applied: bool = False
) -> DeletionRequest:
    """An operator sends a stopped request back to the retry queue, due now.

    With `effect_not_applied` the operator also settles an unknown effect: they
    confirm the target system never applied the current stage's operation, which
    allows the next attempt to submit it (under the same operation id).
    """
    rid = parse_request_id(request_id)
    authority.require(actor, RUN)
    now = clock.now()
    with transaction.atomic():
        req = lock_request(rid)
        resumable = [Status.NEEDS_ATTENTION, *([Status.RETRY_WAIT] if effect_not_applied else [])]
        if req.status not in resumable:
            raise Refused(f"request {req.id} is {req.status}; only a request that needs attention can be resumed")
        if effect_not_applied:
            row = req.stages.filter(is_current=True).first()  # the request is locked: nothing moves it
            if row is None or row.submitted_at is None:
                raise Refused(f"request {req.id}: the current stage submitted nothing, so no effect is unknown")
            target = targets.for_target(req.target)
            try:
                answer = target.lookup(row.operation_id)
            except TargetRefused as refused:
                raise Refused(
                    f"{target.where()} cannot settle operation {row.operation_id}: {refused.message}"
                ) from None
            if isinstance(answer, Found):
                raise Refused(
                    f"{target.where()} has a record of operation {row.operation_id}: it was applied; nothing to resend"
                )
            why = inconclusive(answer, submitted_at=row.submitted_at, where=target.where())
            if why is not None:
                raise Refused(
                    f"evidence inconclusive: {why}; operation {row.operation_id} may have been applied, so it cannot "
                    "be confirmed not applied; nothing was recorded"
                )
            stages.clear_submitted(req.id)
            alarms.resolve(request_id=req.id, kind=alarms.EFFECT_UNKNOWN, now=now)
            decisions.record(
                request_id=req.id,
                actor=actor,
                action="confirm_not_applied",
                reason=reason or f"operation {row.operation_id} confirmed not applied",
                now=now,
            )
        record_resume(req, by=actor.name, custody=custody.resumed(by=actor.name, now=now), now=now)
        req.refresh_from_db()
        decisions.record(
            request_id=req.id, actor=actor, action="resume", reason=reason, now=now, approval=approvals.latest(req)
        )
        return req


def deletion_record_effect(
    *, actor: Actor, request_id: str | UUID, applied: bool, evidence: str, has_agents: bool | None = None
) -> DeletionRequest:
    """An operator records what they did by hand for the effect handed to them (a target that enforces
    nothing: `targets.base.supervised`): applied, with the evidence they saw, or not applied. The record
    is the only evidence there is; the request is resumed, and the next run reads it (`lookup`)."""
    rid = parse_request_id(request_id)
    authority.require(actor, RUN)
    evidence = optional_reason(evidence)  # the reason rules: printable, bounded
    if not evidence:
        raise BadInput("evidence is required (--evidence: what you did or saw in the vendor's console)")
    now = clock.now()
    with transaction.atomic():
        req = lock_request(rid)
        target = targets.for_target(req.target)
        if not supervised(target.capabilities):
            raise Refused(
                f"request {req.id}: {target.name} records its own evidence; nothing is applied by hand there "
                "(an unknown effect is looked up by the next run)"
            )
        row = req.stages.filter(is_current=True).first()  # the request is locked: nothing moves it
        if req.status != Status.NEEDS_ATTENTION or row is None or row.submitted_at is None or row.status != "failed":
            raise Refused(f"request {req.id} ({req.status}) has no effect waiting for an operator; nothing recorded")
        if row.stage == workflow.PURGE_DB and applied and has_agents is None:
            raise BadInput(f"{row.stage} applied: say whether agents are left (--has-agents yes|no); nothing recorded")
        if has_agents is not None and not (row.stage == workflow.PURGE_DB and applied):
            raise BadInput(
                f"--has-agents says what an applied purge_db left; the waiting stage is {row.stage}"
                f"{'' if applied else ', recorded as not applied'}; nothing recorded"
            )
        stages.record_by_hand(
            req.id,
            operation_id=row.operation_id,
            stage=row.stage,
            applied=applied,
            has_agents=has_agents,
            evidence=evidence,
            by=actor.name,
            now=now,
        )
        what = "applied" if applied else "not applied"
        decisions.record(
            request_id=req.id,
            actor=actor,
            action="record_effect",
            reason=f"{row.stage} (operation {row.operation_id}) {what} by hand: {evidence}",
            now=now,
            approval=approvals.latest(req),
        )
        record_resume(req, by=actor.name, custody=custody.resumed(by=actor.name, now=now), now=now)
        transaction.on_commit(lambda: jobs.enqueue_run(rid))
        req.refresh_from_db()
        return req


def deletion_revoke_approval(
    *, actor: Actor, request_id: str | UUID, reason: str, withdrawn: bool = False
) -> DeletionRequest:
    """Withdraw the current approval: nothing more is applied under it (investigation continues)."""
    rid = parse_request_id(request_id)
    authority.require(actor, APPROVE)
    reason = required_reason(reason, "revoke an approval")
    now = clock.now()
    with transaction.atomic():
        req = lock_request(rid)
        approval = approvals.latest(req)
        if req.status in TERMINAL_STATUSES or approval is None or approval.revoked_at is not None:
            raise Refused(f"request {req.id} ({req.status}) has no current approval to revoke")
        approvals.revoke(
            req,
            approval,
            by=actor.name,
            now=now,
            custody=custody.revoked(
                approver=approval.approved_by, by=actor.name, reason=reason, now=now, withdrawn=withdrawn
            ),
        )
        _withdraw(req.id, cause=f"approval revoked by {actor.name}", now=now)
        decisions.record(
            request_id=req.id, actor=actor, action="revoke_approval", reason=reason, now=now, approval=approval
        )
        return req


def _withdraw(request_id: UUID, *, cause: str, now: datetime) -> None:
    """Authority over the request is withdrawn with this decision; the target system is told on
    commit (and by every dispatcher tick until it acknowledges)."""
    withdraw(request_id, cause=cause, now=now)
    transaction.on_commit(lambda: withdrawals.push(now=clock.now(), request_id=request_id))


def deletion_run_now(*, actor: Actor, request_id: str | UUID, reason: str) -> DeletionRequest:
    """Enqueue a worker run on commit; the lease, not the queue, decides who executes."""
    rid = parse_request_id(request_id)
    authority.require(actor, RUN)
    reason = required_reason(reason, "run a deletion now")
    now = clock.now()
    with transaction.atomic():
        req = lock_request(rid)
        if req.status not in (Status.APPROVED, Status.RUNNING, Status.RETRY_WAIT):
            raise Refused(f"request {req.id} is {req.status}; only an approved, running or retrying request can run")
        why_not = cannot_run_now(req, now)
        if why_not:
            raise Refused(f"nothing to run now: {why_not}; nothing was enqueued or recorded")
        decisions.record(
            request_id=req.id, actor=actor, action="run_now", reason=reason, now=now, approval=approvals.latest(req)
        )
        transaction.on_commit(lambda: jobs.enqueue_run(rid))
        return req


EXECUTOR = re.compile(r"^[A-Za-z0-9._:@/-]{1,200}$")  # host:pid, q:host:pid, worker-a


def valid_executor(executor: str) -> str:
    """An executor id is a token: it is written on every lease, attempt and effect."""
    if not EXECUTOR.match(executor or ""):
        raise BadInput(f"--executor-id {shown(executor)} is refused: 1-200 of letters, digits and . _ : @ / -")
    return executor


def run_options(*, request_id: str | UUID, fail_stage: str | None, stage_delay_ms: int | str) -> RunOptions:
    """Validate run flags against the rules before any write."""
    get_request(request_id)
    if fail_stage is not None and fail_stage not in workflow.STAGES:
        raise BadInput(f"--fail-stage {shown(fail_stage)} is not a stage ({', '.join(workflow.STAGES)})")
    try:
        delay = int(str(stage_delay_ms).strip())
    except ValueError:
        raise BadInput(f"--stage-delay-ms {shown(stage_delay_ms)} is not a whole number of milliseconds") from None
    if not 0 <= delay <= MAX_STAGE_DELAY_MS:
        raise BadInput(f"--stage-delay-ms {shown(stage_delay_ms)} is out of range (0-{MAX_STAGE_DELAY_MS})")
    return RunOptions(fail_stage=fail_stage, stage_delay_ms=delay)


def submission_json(req: DeletionRequest) -> dict[str, Any]:
    return {
        "id": str(req.id),
        "status": req.status,
        "target": req.target,
        "requested_by": req.requested_by,
        "inventory": req.inventory_json,
        "inventory_digest": req.inventory_digest,
    }
