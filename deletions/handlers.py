"""A stage's effect at the target system, and its evidence saved through the store.

Each stage marks itself running (and submitted), has the case side sign a grant for its effect
(`receiver.grant`), has the target system apply it in the target's own transaction
(`deletions.targets`), then saves the evidence the target read there: what the case believes is
what the target recorded, never what the worker meant to do. A submission whose outcome is
unknown is looked up at the target, never resent blindly.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core import clock, present
from core.crashpoints import crash_point
from core.logs import event
from deletions import authority, receiver, retry
from deletions.contract import Believed, FailurePlan, Lease, RetryDecision, StageSnapshot
from deletions.errors import Interrupted, StaleLease
from deletions.rules import custody, workflow
from deletions.rules.workflow import Plan
from deletions.store import alarms, stages
from deletions.targets.base import (
    CALL_REFUSED,
    Adapter,
    Found,
    TargetBusy,
    TargetRefused,
    TargetUnreachable,
    inconclusive,
    supervised,
)

logger = logging.getLogger("deletions")


@dataclass(frozen=True)
class RunOptions:
    fail_stage: str | None = None
    stage_delay_ms: int = 0


@dataclass(frozen=True)
class HandlerContext:
    lease: Lease
    options: RunOptions
    plan: Plan  # the approved inventory's communities, read once per run under the lease
    target: Adapter
    stop: threading.Event = field(default_factory=threading.Event)


def run_handler(ctx: HandlerContext, row: StageSnapshot) -> Believed | None:
    """Run one stage: the running mark, the effect at the target, and its evidence believed. Returns
    the evidence to save when the effect was applied, else None (a saved failure, a refusal at either
    side of the boundary, an effect still unknown); the transition saves it with what runs next, one
    restart point (`transition.next_stage`)."""
    waits = bool(ctx.options.stage_delay_ms) or ctx.options.fail_stage == row.stage or ctx.stop.is_set()
    row, submitted_before = stages.begin(ctx.lease, row, now=clock.now(), submit=not waits)
    if submitted_before:
        return settle_unknown_effect(ctx, row)
    try:
        if row.submitted_at is None:  # something to wait for before the effect is submitted
            if ctx.options.fail_stage == row.stage:
                raise RuntimeError(f"injected failure in {row.stage} (--fail-stage)")
            if ctx.options.stage_delay_ms and ctx.stop.wait(ctx.options.stage_delay_ms / 1000):
                raise Interrupted(f"stopped during {row.stage}; the row stays current")
            if ctx.stop.is_set():
                raise Interrupted(f"stopped before {row.stage}; the row stays current")
            row = stages.submit(ctx.lease, row.id, now=clock.now())
        crash_point("after-submit-mark")
    except (Interrupted, StaleLease):
        raise
    except Exception as exc:
        _fail(ctx, row, f"{type(exc).__name__}: {exc}")
        return None
    return _effect(ctx, row)


def _effect(ctx: HandlerContext, row: StageSnapshot) -> Believed | None:
    """The grant, the effect at the target, the evidence saved. Anything but the target's answer
    (a lost connection, a timeout, a stopped server) leaves the effect unknown: the row stays
    submitted, and the next attempt looks the operation up. "Nothing changed, retry" (`TargetBusy`)
    is a plain failed attempt; a refusal the approvers cannot answer (the receiver's database refused
    the effect, or the person's data remains where the dataset file keeps nothing) goes to a person."""
    try:
        grant = receiver.grant(ctx.lease, row, ctx.plan, now=clock.now())
    except receiver.AuthorityRefused as refused:
        # Nothing was sent, and it is no failure: the case goes back to review (an integrity fault: an alarm).
        _set_aside(
            ctx,
            row,
            refused.refusal.rule + _done_before(ctx, row),
            review=refused.refusal.review,
            approval_id=refused.approval_id,
            alarm=alarms.INTEGRITY if refused.refusal.fault else None,
        )
        return None
    except StaleLease:
        raise
    except Exception as exc:  # no grant, so nothing was sent
        _fail(ctx, row, f"{type(exc).__name__}: {exc} (no grant was signed; nothing was sent)")
        return None
    crash_point("after-grant")  # signed, not yet sent: a pause here outlives the lease the grant is bounded by
    try:
        by_hand = supervised(ctx.target.capabilities)  # declared by the receiver, never assumed
    except TargetUnreachable as exc:
        _fail(ctx, row, f"{exc.message} (nothing was sent)")
        return None
    if by_hand:  # it could not refuse a stale or changed effect: a person applies it
        _hand_to_person(ctx, row)
        return None
    try:
        evidence = ctx.target.apply(grant.token)
    except TargetBusy as busy:  # its transaction rolled back: nothing changed, retried with the normal backoff
        said = busy.message.removeprefix("nothing changed: ").removesuffix("; retry")
        nothing = f"nothing changed at {ctx.target.where()} ({busy.kind}): {said}"
        _fail(ctx, row, lambda decided: nothing + _retried(decided))
        return None
    except TargetRefused as refused:
        if refused.kind == "expired":  # nothing applied, nothing unknown: a fresh grant next attempt
            _fail(ctx, row, f"refused by the target system: {refused.message}")
        elif refused.kind == "revoked":  # a withdrawal overtook this grant: the case side says which
            _withdrawn(ctx, row, refused)
        elif refused.kind in FOR_A_PERSON:  # no approval answers it: the receiver or its data must change
            rule = f"refused by the target system ({refused.kind}): {refused.message}; nothing of {row.stage}"
            _set_aside(
                ctx,
                row,
                f"{rule}{_place(row)} was applied{_done_before(ctx, row)}",
                approval_id=grant.approval_id,
                alarm=alarms.BOUNDARY_REFUSED,
                attention=True,
            )
        else:
            _set_aside(
                ctx,
                row,
                f"refused by the target system ({refused.kind}): {refused.message}{_done_before(ctx, row)}",
                approval_id=grant.approval_id,
                alarm=_alarm_of(refused),
            )
        return None
    except Exception as exc:
        _fail(
            ctx,
            row,
            f"effect unknown: operation {row.operation_id} was sent to {ctx.target.name} and no answer came back "
            f"({type(exc).__name__}: {exc}); it is looked up before anything is resent",
            open_question=f"did operation {row.operation_id} ({row.stage}) take effect? the next check looks it up",
        )
        return None
    crash_point("after-effect")
    return _believed(ctx, row, evidence)


def _hand_to_person(ctx: HandlerContext, row: StageSnapshot) -> None:
    """Authority held and the grant is minted, but this receiver enforces nothing: the effect waits for
    an operator, who applies it by hand and records the outcome (its only evidence)."""
    now = clock.now()
    stages.fail(
        ctx.lease,
        row.id,
        f"handed to a person: {ctx.target.name} cannot fence or check versions, so {row.stage} is applied by hand",
        now=now,
        plan=lambda failures, owner: retry.plan_handoff(
            request_id=ctx.lease.request_id,
            target=ctx.plan.target,
            where=ctx.target.name,
            stage=row.stage,
            community_id=row.community_id,
            operation_id=row.operation_id,
            now=now,
        ),
    )


def _withdrawn(ctx: HandlerContext, row: StageSnapshot, refused: TargetRefused) -> None:
    """The target refused a grant minted before authority was withdrawn (a revocation, a
    cancellation): the case side's check, made again now, names the withdrawal and where the case
    goes (back to review, or ended by the cancellation); if authority holds again (a new approval
    since), the next attempt is minted a fresh grant."""
    try:
        receiver.grant(ctx.lease, row, ctx.plan, now=clock.now())
    except receiver.AuthorityRefused as now_refused:
        rule = f"{now_refused.refusal.rule} (the target system refused the grant minted before: {refused.message})"
        _set_aside(ctx, row, rule, review=now_refused.refusal.review, approval_id=now_refused.approval_id)
        return
    _fail(ctx, row, f"refused by the target system: {refused.message}; a fresh grant next attempt")


def _alarm_of(refused: TargetRefused) -> str:
    """A refusal that says the records contradict themselves (a foreign record under the operation
    id, a grant that fails its signature) is an integrity fault; any other is a boundary refusal."""
    return alarms.INTEGRITY if refused.kind in INTEGRITY_KINDS else alarms.BOUNDARY_REFUSED


INTEGRITY_KINDS = frozenset({"record_mismatch", "tampered"})
# Refusals no approval answers: the receiver's database refused the effect (a constraint or data
# error: its dataset file must change), or its last effect found the person's data still in tables the
# file does not keep. Nothing of the effect was applied; a person looks, and the case is never completed.
# So is a call the receiver refused whole (`call_refused`: its signature, its URL, its body): a person
# mends the key, the URL or the clocks, and resumes.
FOR_A_PERSON = frozenset({"constraint", "incomplete", CALL_REFUSED})
SHOWN_DONE = 5  # earlier communities named in a refusal; the rest counted


def _retried(decided: RetryDecision | None) -> str:
    if decided is None:
        return ""
    if decided.next_attempt_at is None:
        return "; not retried again until a person resumes it"
    return f"; retried at {present.absolute(decided.next_attempt_at)}"


def _place(row: StageSnapshot) -> str:
    return f" in community {row.community_id}" if row.community_id else ""


def _done_before(ctx: HandlerContext, row: StageSnapshot) -> str:
    """What a refusal in a later community leaves done: the communities before it in the plan (rules v1
    take them in order, so they are all covered), and this community's first stage for its second."""
    if row.community_id is None or row.community_id not in ctx.plan.position:
        return ""
    earlier = list(ctx.plan.communities[: ctx.plan.position[row.community_id]])
    here = f"purge_db in community {row.community_id}" if row.stage == workflow.PURGE_AGENTS else ""
    if not earlier and not here:
        return ""
    named = ", ".join(earlier[:SHOWN_DONE]) + (
        f" and {len(earlier) - SHOWN_DONE} more" if len(earlier) > SHOWN_DONE else ""
    )
    parts = [f"communit{'y' if len(earlier) == 1 else 'ies'} {named}" if earlier else "", here]
    return f"; already done: {', '.join(p for p in parts if p)} (their evidence is saved)"


def _set_aside(
    ctx: HandlerContext,
    row: StageSnapshot,
    rule: str,
    *,
    review: bool = True,
    approval_id: Any,
    alarm: str | None = None,
    attention: bool = False,
    in_question: bool = False,
) -> None:
    """`attention`: a person (the operators on call) answers it, not an approval; `in_question`: the
    receiver may have applied the effect, so the row stays submitted and the next attempt looks it up."""
    now = clock.now()
    if in_question:
        held = custody.in_question(rule=rule, now=now)
    elif attention:
        held = custody.refused_for_a_person(rule=rule, now=now)
    else:
        held = custody.refused_at_boundary(rule=rule, now=now, fault=alarm == alarms.INTEGRITY)
    stages.set_aside(
        ctx.lease,
        row.id,
        rule,
        review=review,
        attention=attention or in_question,
        in_question=in_question,
        custody=held,
        approval_id=approval_id,
        now=now,
        alarm=alarm,
    )


def _believed(ctx: HandlerContext, row: StageSnapshot, recorded: dict[str, Any]) -> Believed | None:
    """The evidence the target recorded, to be saved with the next step; None when it contradicts the
    row (never saved as this stage's evidence: an integrity fault, set aside for a person)."""
    contradiction = authority.contradiction(recorded, row)
    if contradiction:  # never saved as this stage's evidence: an integrity fault a person looks at
        # The receiver answered with evidence it signed: it recorded something under this operation.
        said = ", ".join(f"{k} {str(v)[:80]}" for k, v in recorded.items() if k != "receipt")[:600]
        _set_aside(
            ctx,
            row,
            f"{ctx.target.where()} recorded operation {row.operation_id} ({row.stage}), so it may have been applied, "
            f"but {contradiction}; what it recorded: {said or 'nothing readable'}",
            approval_id=None,
            alarm=alarms.INTEGRITY,
            in_question=True,
        )
        return None
    return Believed(row, recorded, ctx.target.believed_state(recorded))


def _fail(ctx: HandlerContext, row: StageSnapshot, error: stages.Said, open_question: str = "") -> None:
    """A failed attempt, retried as policy plans; `error` may say what was decided (when it is retried)."""
    now = clock.now()
    said: Callable[[RetryDecision | None], str] = (lambda decided: error) if isinstance(error, str) else error

    def plan(failures: int, owner: str) -> FailurePlan:
        return retry.plan_failure(
            failures=failures,
            owner=owner,
            stage=row.stage,
            error=said(retry.decide_retry(failures, now)),
            open_question=open_question,
            now=now,
        )

    stages.fail(ctx.lease, row.id, said, now=now, plan=plan)


def settle_unknown_effect(ctx: HandlerContext, row: StageSnapshot) -> Believed | None:
    """An earlier attempt submitted: look the operation up at the target, never resend blindly.

    Found: save the evidence the target recorded. Not found as of a watermark past the submission:
    it was not applied, so it is sent again under the same operation id (the target applies an
    operation once). Anything less (the lookup source lags behind the submission, or cannot be
    read) leaves the effect unknown, with an owner and a next check.
    """
    where = ctx.target.where()
    event(
        logger,
        "lookup",
        request_id=ctx.lease.request_id,
        stage_id=row.id,
        stage=row.stage,
        executor=ctx.lease.owner,
        generation=ctx.lease.generation,
        reason=(
            f"operation {row.operation_id} submitted at {present.absolute(row.submitted_at)}; looking it up in {where}"
        ),
    )
    try:
        answer = ctx.target.lookup(row.operation_id)
    except TargetRefused as refused:
        # Submitted, and the lookup cannot settle it: whatever it found (a record under a key not
        # registered, a "not found" nobody signed, a foreign record), the effect stays in question.
        rule = (
            f"operation {row.operation_id} ({row.stage}) was submitted at {present.absolute(row.submitted_at)}; "
            f"the lookup at the target system ({refused.kind}) found: {refused.message}"
        )
        _set_aside(ctx, row, rule, approval_id=None, alarm=_alarm_of(refused), in_question=True)
        return None
    if isinstance(answer, Found):
        return _believed(ctx, row, answer.evidence)
    assert row.submitted_at is not None
    found = inconclusive(answer, submitted_at=row.submitted_at, where=where)
    if found is None:
        event(
            logger,
            "not_applied",
            request_id=ctx.lease.request_id,
            stage_id=row.id,
            reason=f"{where} has no record of operation {row.operation_id} as of a watermark past its submission at "
            f"{present.absolute(row.submitted_at)}: not applied; sending it again",
        )
        return _effect(ctx, row)
    _fail(
        ctx,
        row,
        f"effect unknown: operation {row.operation_id} ({row.stage}) was submitted, but {found}; not resent",
        open_question=f"did operation {row.operation_id} ({row.stage}) take effect? the next check looks it up again",
    )
    return None
