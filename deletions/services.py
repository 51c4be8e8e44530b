"""User-deletion services: one function per staff decision, called by the admin and the commands.

Each takes the acting `Actor`, checks the action's permission itself, validates
its input before any write, locks the request, refuses with the rule's name,
asks the store to write, logs the decision and enqueues work on commit.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction

from core import access, authority, clock, present
from core import custody as rota_rules
from core.authority import Actor
from core.errors import optional_reason, required_reason, shown
from deletions import case, contract, jobs, proposal, selectors, targets, withdrawals
from deletions.case import cannot_run_now
from deletions.errors import AlreadyOpen, BadInput, Refused
from deletions.handlers import RunOptions
from deletions.models import TERMINAL_STATUSES, DeletionApproval, DeletionRequest, Status
from deletions.rules import custody, inventory, workflow
from deletions.selectors import cancel_facts, get_request, parse_request_id
from deletions.store import alarms, approvals, decisions, stages
from deletions.store.requests import (
    assign,
    extend_deadline,
    insert_request,
    inventory_digest,
    lock_request,
    record_cancel,
    record_resume,
    review_recorded_effect,
)
from deletions.store.withdrawals import withdraw
from deletions.targets.base import Found, TargetRefused, inconclusive, supervised

DIGEST_PATTERN = "^[0-9a-fA-F]{64}$"  # an inventory's SHA-256 as a case shows it (any case, spaces trimmed)
MAX_STAGE_DELAY_MS = 3_600_000  # an hour: far past the lease, enough for any demo
SUBMIT = "deletions.submit_deletionrequest"
APPROVE = "deletions.approve_deletionrequest"
CANCEL = "deletions.cancel_deletionrequest"
RUN = "deletions.run_deletionrequest"
VIEW = "deletions.view_deletionrequest"
ASSIGN = "deletions.assign_deletionrequest"
EXTEND = "deletions.extend_deadline_deletionrequest"
ROTA_PERMISSION = contract.ROTA_PERMISSION  # who may be on each rota: {APPROVERS: APPROVE, OPERATORS_ON_CALL: RUN}


def deletion_submit(
    *,
    actor: Actor,
    target: str,
    reason: str = "",
    communities: int = inventory.DEMO_COMMUNITIES,
    received_at: datetime | None = None,
) -> DeletionRequest:
    """Submit a request received at `received_at` (the intake's time; now when not given): its legal
    deadline runs from then. The approvers' rota names its person and backup at once."""
    authority.require(actor, SUBMIT)
    reason = optional_reason(reason)
    now = clock.now()
    received = received_at or now
    refused = custody.received_refusal(received, now)
    if refused:
        raise Refused(refused)
    inv = deletion_inventory(target, communities)
    with transaction.atomic():
        try:
            req = insert_request(
                entity_type="user",
                target=target,
                requested_by=actor.user,
                inventory=inv,
                version=inventory.INVENTORY_VERSION,
                custody=custody.submitted(now),
                received_at=received,
                due_at=custody.due(received, settings.DELETION_DEADLINE_MONTHS),
                now=now,
            )
        except AlreadyOpen:  # the existing case named only to a caller who may see targets
            if access.Lens.of(actor.user).targets:
                raise
            raise AlreadyOpen(AlreadyOpen.unnamed) from None
        decisions.record(request_id=req.id, actor=actor, action="submit", reason=reason, now=now)
        if _name_by_rota(req, now, unsettled=False, rotas=_Rotas()):
            req.refresh_from_db()
        return req


def deletion_inventory(target: str, communities: int = inventory.DEMO_COMMUNITIES) -> dict[str, Any]:
    """The inventory a submission would propose: the person's communities as the target system lists them."""
    inventory.validate_target(target)
    inventory.check_community_count(communities)
    inv = inventory.build_inventory(target, targets.for_target(target).inventory(target, communities))
    inventory.validate_inventory(inv)
    return inv


def deletion_approve(*, actor: Actor, request_id: str | UUID, digest: str) -> DeletionApproval:
    """Four eyes on the exact inventory: an approver who is not the submitter approves the digest they saw."""
    rid = parse_request_id(request_id)
    authority.require(actor, APPROVE)
    digest = (digest or "").strip().lower()
    if not re.fullmatch(DIGEST_PATTERN, digest):
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
                f"four eyes: {req.requested_by} submitted request {req.id}, so they cannot also approve it; "
                "another approver must"
            )
        found = selectors.faults(req.id)
        blocked = custody.faults_refusal("approved", open_faults=found.open, applied_after=found.applied_after)
        if blocked:
            raise Refused(blocked)
        recomputed = inventory_digest(req.inventory_json)
        if recomputed != req.inventory_digest:
            raise Refused(f"saved inventory digest {req.inventory_digest} does not match its inventory {recomputed}")
        if digest != req.inventory_digest:
            raise Refused(f"approval digest {digest} does not match inventory {req.inventory_digest}")
        inventory.validate_inventory(req.inventory_json)
        seen = proposal.of_request(req)  # read from the target now: what this approval covers
        if seen.unreadable:  # nothing is known of the person's data now: no approval of it
            raise Refused(f"{seen.unreadable}, so nothing was approved; approve again once it answers")
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
        transaction.on_commit(lambda: jobs.enqueue_run(rid, req.target))
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
    reason = optional_reason(reason)
    now = clock.now()
    with transaction.atomic():
        req = lock_request(rid)
        resumable = [Status.NEEDS_ATTENTION, *([Status.RETRY_WAIT] if effect_not_applied else [])]
        if req.status not in resumable:
            raise Refused(f"request {req.id} is {req.status}; only a request that needs attention can be resumed")
        found = selectors.faults(req.id)
        blocked = custody.faults_refusal("resumed", open_faults=found.open, applied_after=found.applied_after)
        if blocked:  # resuming would go on toward a completion the fault stops
            raise Refused(f"request {req.id}: {blocked}")
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
        if req.status == Status.NEEDS_ATTENTION:
            # The operator answered a refusal no approval answers: the next run checks again at the
            # receiver, and raises the alarm again if it still stands. (A fault is closed by a person's
            # own decision, never by a resume: `deletion_close_alarm`.)
            alarms.resolve(request_id=req.id, kind=alarms.BOUNDARY_REFUSED, now=now)
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
    is the only evidence there is; the request is resumed, and the next run reads it (`lookup`). A
    record is final: one per hand-over (a correction is an approver's, `deletion_correct_effect`)."""
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
        if submitted_by(req, actor):
            raise Refused(custody.own_effect(req.requested_by))
        first = selectors.handover_record(row.operation_id, row.attempts) or selectors.applied_record(row.operation_id)
        final = custody.record_refusal(
            operation_id=row.operation_id,
            recorded=(first.recorded_by, first.applied, first.recorded_at) if first is not None else None,
        )
        if final:
            raise Refused(f"request {req.id}: {final}; nothing recorded")
        found = selectors.faults(req.id)
        blocked = custody.faults_refusal("recorded", open_faults=found.open, applied_after=found.applied_after)
        if blocked:
            raise Refused(f"request {req.id}: {blocked}; nothing recorded")
        agents = custody.agents_refusal(stage=row.stage, applied=applied, has_agents=has_agents)
        if agents:
            raise BadInput(f"{agents}; nothing recorded")
        stages.record_by_hand(
            req.id,
            operation_id=row.operation_id,
            stage=row.stage,
            applied=applied,
            has_agents=has_agents,
            evidence=evidence,
            by=actor.name,
            now=now,
            attempt=row.attempts,  # the hand-over it answers
        )
        what = "applied" if applied else "not applied"
        approval = approvals.latest(req)
        decisions.record(
            request_id=req.id,
            actor=actor,
            action="record_effect",
            reason=f"{row.stage} (operation {row.operation_id}) {what} by hand: {evidence}",
            now=now,
            approval=approval,
        )
        gone = custody.authority_gone(
            revoked_at=approval.revoked_at if approval else None,
            expires_at=approval.expires_at if approval else None,
            now=now,
        )
        if applied and gone:  # kept as a fact; never a plain completion
            held = custody.applied_after(gone, stage=row.stage, operation_id=row.operation_id, by=actor.name, now=now)
            alarms.raise_alarm(request_id=req.id, kind=alarms.AFTER_WITHDRAWAL, message=held.open_question, now=now)
            review_recorded_effect(req, custody=held, action=f"{row.stage} applied by hand after {gone}", now=now)
            req.refresh_from_db()
            if _name_by_rota(req, now, unsettled=selectors.unsettled(req.id), rotas=_Rotas()):  # the approvers'
                req.refresh_from_db()
            return req
        alarms.resolve(request_id=req.id, kind=alarms.BOUNDARY_REFUSED, now=now)
        record_resume(req, by=actor.name, custody=custody.resumed(by=actor.name, now=now), now=now)
        transaction.on_commit(lambda: jobs.enqueue_run(rid, req.target))
        req.refresh_from_db()
        return req


def deletion_correct_effect(
    *,
    actor: Actor,
    request_id: str | UUID,
    applied: bool,
    evidence: str,
    reason: str,
    has_agents: bool | None = None,
) -> DeletionRequest:
    """An approver corrects the case's latest record of an effect applied by hand: a new record
    linked to it, both kept (`custody.correction_refusal`: not the recorder, not the submitter, not
    once its stage completed from it). The case does not move: a run not yet made reads the
    correction; an open alarm stays open until a person closes it."""
    rid = parse_request_id(request_id)
    authority.require(actor, APPROVE)
    reason = required_reason(reason, "correct a record")
    evidence = optional_reason(evidence)
    if not evidence:
        raise BadInput("evidence is required (--evidence: what was in fact done, and how you know)")
    now = clock.now()
    with transaction.atomic():
        req = lock_request(rid)
        latest = selectors.latest_record(req.id)
        row = req.stages.filter(operation_id=latest.operation_id).first() if latest is not None else None
        why = custody.correction_refusal(
            actor=actor.name,
            submitter=req.requested_by if submitted_by(req, actor) else "",
            recorded_by=latest.recorded_by if latest is not None else None,
            corrected_by=getattr(getattr(latest, "correction", None), "recorded_by", None),
            stage_done=row is not None and row.status == "completed",
        )
        if why or latest is None:
            raise Refused(f"request {req.id}: {why}; nothing recorded")
        agents = custody.agents_refusal(stage=latest.stage, applied=applied, has_agents=has_agents)
        if agents:
            raise BadInput(f"{agents}; nothing recorded")
        stages.record_by_hand(
            req.id,
            operation_id=latest.operation_id,
            stage=latest.stage,
            applied=applied,
            has_agents=has_agents,
            evidence=evidence,
            by=actor.name,
            now=now,
            attempt=latest.attempt,
            corrects=latest.id,
        )
        was, what = ("applied" if latest.applied else "not applied"), ("applied" if applied else "not applied")
        decisions.record(
            request_id=req.id,
            actor=actor,
            action="correct_effect",
            reason=f"{latest.recorded_by}'s record of {latest.stage} (operation {latest.operation_id}) said {was}; "
            f"corrected to {what}: {evidence}; {reason}",
            now=now,
            approval=approvals.latest(req),
        )
        return req


def deletion_close_alarm(*, actor: Actor, request_id: str | UUID, reason: str, kind: str = "") -> DeletionRequest:
    """A named person closes a fault (an integrity fault, an effect applied after withdrawal) with
    what they found: a decision on the case, the only way such an alarm closes (never a side effect
    of a cancel, a resume or an approval). `kind`: which, when more than one is open."""
    rid = parse_request_id(request_id)
    authority.require(actor, APPROVE)
    reason = required_reason(reason, "close an alarm")
    now = clock.now()
    with transaction.atomic():
        req = lock_request(rid)
        found = selectors.faults(req.id)
        kind = kind.strip() or (next(iter(found.open)) if len(found.open) == 1 else "")
        if not kind:
            raise BadInput(
                f"request {req.id} has {len(found.open)} open faults: say which to close "
                f"(--kind {' or '.join(sorted(found.open))})"
                if found.open
                else f"request {req.id}: {custody.NO_FAULT}; nothing to close"
            )
        why = custody.close_refusal(
            kind,
            open_faults=found.open,
            actor=actor.name,
            submitter=req.requested_by if submitted_by(req, actor) else "",
            recorded_by=selectors.recorders(req.id),
        )
        if why:
            raise Refused(f"request {req.id}: {why}; nothing was recorded")
        decision = decisions.record(
            request_id=req.id, actor=actor, action="close_alarm", reason=f"{kind}: {reason}", now=now
        )
        alarms.close_fault(request_id=req.id, kind=kind, decision_id=decision.id, now=now)
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
        req.refresh_from_db()
        _name_by_rota(req, now, unsettled=selectors.unsettled(req.id), rotas=_Rotas())  # whom it waits on now
        req.refresh_from_db()
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
        transaction.on_commit(lambda: jobs.enqueue_run(rid, req.target))
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
        "received_at": req.received_at.isoformat(),
        "due_at": req.due_at.isoformat(),
        "responsible": req.assignee.get_username() if req.assignee is not None else None,
        "backup": req.backup.get_username() if req.backup is not None else None,
    }


# Custody: the person and backup of a case, the deadline, and who looked at a masked target.


class _Rotas:
    """The rotas' members and their open load, read once per pass."""

    def __init__(self) -> None:
        self._members: dict[str, list[Any]] = {}
        self.load: Counter[int] = Counter()

    def members(self, rota: str) -> list[Any]:
        if rota not in self._members:
            self._members[rota] = rota_rules.rota(rota, ROTA_PERMISSION[rota])
            self.load.update(selectors.open_load([m.pk for m in self._members[rota]]))
        return self._members[rota]

    def eligible(self, rota: str, req: DeletionRequest) -> list[rota_rules.Member]:
        """The rota's members who may hold this case: never its submitter (`case.may_hold`)."""
        return [
            rota_rules.Member(m.pk, m.get_username(), self.load[m.pk])
            for m in self.members(rota)
            if case.may_hold(req, m)
        ]


def rotas_of(user: Any) -> list[str]:
    """The rotas `user` is on now (what "waiting for me" includes beyond their own cases)."""
    return [name for name, perm in ROTA_PERMISSION.items() if any(m.pk == user.pk for m in rota_rules.rota(name, perm))]


def _name_by_rota(req: DeletionRequest, now: datetime, *, unsettled: bool, rotas: _Rotas) -> bool:
    """Name the case's person and backup for its state from the rota (nobody while the system runs
    it). A person still on the same rota keeps the case. True when a naming was saved. A rota's
    naming is not a decision (no row in the log); taking, assigning and handing over are."""
    key = case.custody_key(req, now, unsettled)
    if key == req.assigned_for:
        return False
    rota = case.rota_for(req, now, unsettled)
    pick = rota_rules.Pick(None, None)
    if rota is not None:
        members = rotas.eligible(rota, req)
        same_rota = req.assigned_for.endswith(f":{rota}")
        keep = req.assignee_id if same_rota and req.assignee_id in {m.id for m in members} else None
        pick = rota_rules.pick(members, keep=keep)
        if pick.person is None or pick.backup is None:
            # Fewer than two on the rota may hold it: nobody is named (health counts the case as unnamed
            # until the rota has two), never a person without a backup.
            return False
    if not assign(
        req.id, status=req.status, was=req.assigned_for, key=key, person=pick.person, backup=pick.backup, now=now
    ):
        return False
    if pick.person is not None:
        rotas.load[pick.person] += 1
    return True


def deletion_name_by_rota(*, limit: int = 500) -> int:
    """The rota names a person and backup for every open case whose state changed since it was named
    (the custody schedule runs it each minute, before notifications). Returns how many were named."""
    now = clock.now()
    rotas = _Rotas()
    named = 0
    for req in selectors.custody_candidates(limit):
        with transaction.atomic():
            named += _name_by_rota(req, now, unsettled=bool(getattr(req, "unsettled", False)), rotas=rotas)
    return named


def deletion_name_now(request_id: UUID) -> bool:
    """Name the person and backup of one case right after a worker moved it (needs attention, an
    open question, back in review), so a case that waits on a person names one from its first moment,
    not at the custody pass a minute later. True when a naming was saved."""
    req = selectors.custody_candidate(request_id)
    if req is None:
        return False
    with transaction.atomic():
        return _name_by_rota(req, clock.now(), unsettled=bool(getattr(req, "unsettled", False)), rotas=_Rotas())


def deletion_custody(
    *, actor: Actor, request_id: str | UUID, how: str, reason: str, person: str = ""
) -> DeletionRequest:
    """Take a case (for yourself), assign it (a lead, to anyone on its rota) or hand it over (its
    person or backup, to anyone on its rota): a decision with a reason (`core.custody.by_hand`)."""
    rid = parse_request_id(request_id)
    if how not in rota_rules.HOW:
        raise BadInput(f"{shown(how)} is not a custody move: take, assign or hand over")
    reason = required_reason(reason, f"{how} a case")
    now = clock.now()
    with transaction.atomic():
        req = lock_request(rid)
        if req.status in TERMINAL_STATUSES:
            raise Refused(f"request {req.id} is {req.status}: an ended case is held by nobody")
        unsettled = selectors.unsettled(req.id)
        rota = case.rota_for(req, now, unsettled)
        if rota is None:
            why = case.custodians(req, now, unsettled).why
            raise Refused(f"request {req.id}: {why}; nobody is named until it waits on a person")
        rotas = _Rotas()
        key = case.custody_key(req, now, unsettled)
        chosen = actor.name if how == rota_rules.TAKE else person
        if chosen.casefold() == req.requested_by.casefold():
            raise Refused(
                f"request {req.id}: four eyes: {req.requested_by} submitted this request, so they never hold it, "
                "as person or backup; nothing was recorded"
            )
        current = req.assigned_for == key
        try:
            new, pick = rota_rules.by_hand(
                how,
                rota_name=rota,
                actor=actor.user,
                users=[m for m in rotas.members(rota) if case.may_hold(req, m)],
                load=rotas.load,
                person_id=req.assignee_id if current else None,
                backup_id=req.backup_id if current else None,
                named=person,
                may_assign=authority.may(actor.user, ASSIGN),
            )
        except Refused as refused:
            raise Refused(f"request {req.id}: {refused.message}; nothing was recorded") from None
        if pick.backup is None:
            raise Refused(
                f"request {req.id}: nobody else on the {rota} rota may back up {new.get_username()} "
                "(a case waiting on people has a person and a backup); nothing was recorded"
            )
        assign(
            req.id, status=req.status, was=req.assigned_for, key=key, person=pick.person, backup=pick.backup, now=now
        )
        req.refresh_from_db()
        b = req.backup.get_username() if req.backup is not None else "none on the rota"
        decisions.record(
            request_id=req.id,
            actor=actor,
            action=how.replace(" ", "_"),
            reason=f"{new.get_username()} holds it (backup: {b}): {reason}",
            now=now,
        )
        return req


def deletion_extend_deadline(*, actor: Actor, request_id: str | UUID, until: datetime, reason: str) -> DeletionRequest:
    """Move the legal deadline later, with a reason, at most the legal maximum after receipt."""
    rid = parse_request_id(request_id)
    authority.require(actor, EXTEND)
    reason = required_reason(reason, "extend a deadline")
    now = clock.now()
    with transaction.atomic():
        req = lock_request(rid)
        if req.status in TERMINAL_STATUSES:
            raise Refused(f"request {req.id} is {req.status}: its deadline no longer runs")
        why = custody.extension_refusal(
            received_at=req.received_at,
            due_at=req.due_at,
            until=until,
            max_months=settings.DELETION_DEADLINE_MAX_MONTHS,
        )
        if why:
            raise Refused(f"request {req.id}: {why}; nothing was recorded")
        said = f"deadline extended by {actor.name} to {present.absolute(until)}"
        extend_deadline(req.id, was=req.due_at, due_at=until, action=said, now=now)
        decisions.record(
            request_id=req.id,
            actor=actor,
            action="extend_deadline",
            reason=f"from {present.absolute(req.due_at)} to {present.absolute(until)}: {reason}",
            now=now,
        )
        req.refresh_from_db()
        return req


def deletion_reveal(*, actor: Actor, request_id: str | UUID, reason: str) -> str:
    """The full target of a case whose target the actor sees masked, for a reason: the reveal is a
    decision on the case (who looked, when and why)."""
    rid = parse_request_id(request_id)
    authority.require(actor, VIEW)
    reason = required_reason(reason, "reveal a target")
    now = clock.now()
    with transaction.atomic():
        req = get_request(rid)
        decisions.record(request_id=req.id, actor=actor, action="reveal", reason=reason, now=now)
        return req.target
