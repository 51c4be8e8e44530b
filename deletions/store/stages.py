"""Stage outcomes and atomic stage transitions. Knows no stage names.

Every move is one named statement of `stages.sql` (its only writer), fenced by the lease's owner
and generation and the state it expects; a statement that finds nothing writes nothing, and one
read (`why_not`) raises the reason. `transition_stage(lease, decide)` locks the parent with its
current row, calls the pure `decide` while holding the lock, checks the returned operation against
the lifecycle and applies it through the same statements; an error from `decide` rolls back.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4, uuid5

from django.db import connection, transaction

from core import present
from core.errors import DomainError
from core.logs import event
from core.sql import Statements
from deletions import selectors
from deletions.contract import (
    Advance,
    AlreadyFinished,
    Believed,
    Custody,
    EndCancelled,
    FailurePlan,
    Finished,
    Initialize,
    Lease,
    NewStage,
    NextStage,
    Operation,
    RequestSnapshot,
    Resume,
    RetryDecision,
    StageSnapshot,
    WaitUntil,
)
from deletions.errors import RetryNotDue, StaleLease, UnknownRequest, WorkflowError
from deletions.store import alarms, decisions
from deletions.store.leases import check_owner

MAX_STAGES = 10_000
logger = logging.getLogger("deletions")
SQL = Statements.beside(__file__, "stages.sql")

Decide = Callable[[RequestSnapshot, list[StageSnapshot], datetime], Operation]
PlanFailure = Callable[[int, str], FailurePlan]  # (failures in a row, the case's owner) -> what happens
Said = str | Callable[[RetryDecision | None], str]  # an error, or one that says what was decided (None: nothing)

# Parked for a person, or ended: a transition returns without writing.
_PARKED = ("completed", "cancelled", "needs_attention", "needs_review")


def snapshot(row: tuple[Any, ...]) -> StageSnapshot:
    """A stage row as the statements return it (id .. submitted_at, in that order)."""
    (sid, stage, community, status, is_current, metadata, started, finished, error, op_id, attempts, submitted) = row[
        :12
    ]
    return StageSnapshot(
        id=sid,
        stage=stage,
        community_id=str(community) if community else None,
        status=status,
        is_current=is_current,
        metadata=(json.loads(metadata) if isinstance(metadata, str) else metadata) or {},
        started_at=started,
        finished_at=finished,
        last_error=error,
        operation_id=op_id,
        attempts=attempts,
        submitted_at=submitted,
    )


def _why_not(cur: Any, lease: Lease, stage_id: UUID | None, move: str) -> DomainError:
    """The one read after a fenced statement found nothing: the reason, typed."""
    found = SQL.one(cur, "why_not", request_id=lease.request_id, stage_id=stage_id)
    if found is None:
        return UnknownRequest(f"no deletion request with id {lease.request_id}")
    owner, generation, status, cancel_requested, stage, stage_status, is_current = found
    try:
        check_owner(lease, owner, generation)
    except StaleLease as stale:
        return stale
    if stage_id is not None and stage is None:
        return WorkflowError(f"stage {stage_id} does not belong to request {lease.request_id}")
    if stage_id is not None and not is_current:
        return StaleLease(f"stage {stage_id} ({stage}) is no longer the current stage of request {lease.request_id}")
    where = f"stage {stage_id} ({stage}) is {stage_status}, request {lease.request_id} is {status}"
    if cancel_requested:
        where += " with a cancellation recorded"
    return WorkflowError(f"{where}: cannot {move}")


def _fenced(lease: Lease, **params: Any) -> dict[str, Any]:
    return {"request_id": lease.request_id, "owner": lease.owner, "generation": lease.generation, **params}


def _new_row(lease: Lease, new: NewStage, previous: UUID | None) -> dict[str, Any]:
    metadata = {"inputs": new.inputs, "previous_stage_id": str(previous) if previous else None}
    return {
        "id": uuid4(),
        "stage": new.stage,
        "community_id": new.community_id,
        "metadata": json.dumps(metadata),
        "operation_id": operation_id(lease.request_id, new.stage, new.community_id),
    }


def start(lease: Lease, first: NewStage, *, now: datetime) -> StageSnapshot | None:
    """Initialize: an approved request with no history moves to running with its first row, in one
    statement. None, with nothing written, when the request is not that (under this lease, no
    stage, no cancellation): the caller takes `transition_stage`, which says why."""
    with connection.cursor() as cur:  # one statement: its own transaction
        row = _start_request(cur, lease, first, now)
    if row is None:
        return None
    _transition_event(lease, row[0], first.stage, "Initialize")
    return snapshot(row)


def _start_request(cur: Any, lease: Lease, first: NewStage, now: datetime) -> tuple[Any, ...] | None:
    action = f"initialized with {first.stage}"
    return SQL.one(cur, "start_request", **_fenced(lease, **_new_row(lease, first, None), now=now, action=action))


def begin(lease: Lease, row: StageSnapshot, *, now: datetime, submit: bool) -> tuple[StageSnapshot, bool]:
    """The running mark (with the submitted mark when `submit`) in one statement, its own
    transaction (it writes all of the move or nothing). Returns the row and
    whether an earlier attempt had already submitted its effect (then it is looked up, not resent)."""
    with connection.cursor() as cur:  # one statement: its own transaction
        action = f"{lease.owner} (generation {lease.generation}) started {row.stage}"
        saved = SQL.one(cur, "begin_stage", **_fenced(lease, stage_id=row.id, now=now, submit=submit, action=action))
        if saved is None:
            raise _why_not(cur, lease, row.id, "start it (only the unfinished current stage of a running request runs)")
    return snapshot(saved), bool(saved[12])


def submit(lease: Lease, stage_id: UUID, *, now: datetime) -> StageSnapshot:
    """Saved before the effect is first submitted: a crash after this leaves the effect unknown,
    to be settled from the target system's record."""
    with connection.cursor() as cur:  # one statement: its own transaction
        saved = SQL.one(cur, "submit_stage", **_fenced(lease, stage_id=stage_id, now=now))
        if saved is None:
            raise _why_not(cur, lease, stage_id, "submit its effect (only a running stage submits)")
    return snapshot(saved)


def save_and_advance(lease: Lease, believed: Believed, op: Advance, *, now: datetime) -> NextStage | None:
    """The restart point: the target system's record of the effect saved (`save_result`, with the
    receiver state it carries noted) and the rules' next step written (`advance`, or `complete`), both
    in one transaction, pipelined (one commit, one network round trip). A crash leaves the row running
    and submitted (looked up and saved again) or the successor current, never anything between.

    The save is fenced by this lease and a running request: StaleLease, or the reason, when it finds
    anything else. The step is fenced too (no cancellation, that row completed and current): None when
    it finds anything else, the result still saved; the caller then takes `transition_stage`."""
    row, state = believed.row, believed.receiver_state
    prefix, incarnation, applied = state if state is not None else (None, None, None)
    saved = _fenced(
        lease, stage_id=row.id, now=now, result=json.dumps(believed.evidence), action=_done(lease, "completed"),
        prefix=prefix, incarnation=incarnation, applied=applied,
    )  # fmt: skip
    step, params = _step(lease, row.stage, op, now)
    with connection.cursor() as first, connection.cursor() as second:  # Django's: its execute wrappers see both
        with connection.wrap_database_errors, connection.connection.pipeline():
            first.execute(SQL.sql("save_result"), saved)
            second.execute(step, params)
        if first.fetchone() is None:  # the save found nothing, so neither did the step: nothing written
            raise _why_not(first, lease, row.id, "save its result (only a running stage has one)")
        moved = second.fetchone()
    if moved is None:
        return None
    nxt = _moved(lease, op, moved)
    _transition_event(lease, getattr(nxt, "id", None), getattr(nxt, "stage", None),
                      "Advance" if isinstance(nxt, StageSnapshot) else "finished completed")  # fmt: skip
    return nxt


@contextmanager
def _noted_if_stale(lease: Lease, stage_id: UUID, seen: str, *, now: datetime) -> Iterator[None]:
    """A worker whose lease was taken over cannot record a failure or a refusal on the case, but
    what it met (the receiver refusing its stale generation, an expired or withdrawn grant) is kept
    on its own attempt, once, so a person reads the receiver's reason on the case page."""
    try:
        yield
    except StaleLease:
        with connection.cursor() as cur:  # one statement, after the refused move rolled back
            SQL.run(cur, "note_stale_attempt", **_fenced(lease, stage_id=stage_id, error=seen, now=now))
        raise


def _done(lease: Lease, what: str) -> str:
    return f"{lease.owner} (generation {lease.generation}) {what}"


def fail(lease: Lease, stage_id: UUID, error: Said, *, now: datetime, plan: PlanFailure) -> RetryDecision:
    """Row failed + current; the request waits to retry (or for an operator) as policy decides
    from the failure count and the case's owner, read under the request lock. `error` may say what
    was decided (when the attempt is retried)."""
    seen = error if isinstance(error, str) else error(None)  # what a worker whose lease was taken over notes
    with _noted_if_stale(lease, stage_id, seen, now=now), transaction.atomic(), connection.cursor() as cur:
        locked = _lock(cur, lease)
        failures = locked.retry_count + 1
        decided = plan(failures, locked.owner)
        error = error if isinstance(error, str) else error(decided.decision)
        stage = locked.current.stage if locked.current else "?"
        done = SQL.one(
            cur,
            "fail_stage",
            **_fenced(
                lease,
                stage_id=stage_id,
                now=now,
                error=error,
                status=decided.status,
                retry_count=locked.retry_count,
                next_attempt_at=decided.decision.next_attempt_at,
                case_owner=decided.owner,
                open_question=decided.open_question,
                next_check_at=decided.next_check_at,
                outcome="effect_unknown" if decided.alarm else "failed",
                action=_done(lease, f"failed {stage}: {error}"),
            ),
        )
        if done is None:
            raise _why_not(cur, lease, stage_id, "record its failure (only a running stage fails)")
        if decided.alarm:
            next_check = present.absolute(decided.next_check_at) if decided.next_check_at else "none"
            alarms.raise_alarm(
                request_id=lease.request_id,
                kind=alarms.EFFECT_UNKNOWN,
                message=f"{decided.open_question} (owner {decided.owner}, next check {next_check})",
                now=now,
                stage_id=stage_id,
            )
    event(
        logger,
        "needs_attention" if decided.decision.needs_attention else "retry",
        logging.WARNING,
        request_id=lease.request_id,
        stage_id=stage_id,
        stage=stage,
        executor=lease.owner,
        generation=lease.generation,
        reason=f"failure {failures}: {error}",
    )
    return decided.decision


def set_aside(
    lease: Lease,
    stage_id: UUID,
    rule: str,
    *,
    review: bool,
    custody: Custody,
    approval_id: UUID | None,
    now: datetime,
    alarm: str | None = None,
    attention: bool = False,
    in_question: bool = False,
) -> None:
    """The receiver refused the effect, or the lookup could not settle it; it is no failure (no retry
    counted).

    Refused, nothing was applied: the row goes back to pending, not submitted. With `in_question` the
    receiver may have applied it (a record the lookup could not believe, evidence naming another
    effect): the row keeps its submitted mark, so the next attempt looks it up again, and its attempt
    ends as an unknown effect. The request waits for the people `custody` names: with `attention`, the
    operators on call (needs attention: no approval answers it); else with `review`, the approvers
    (back in review); else (a cancellation) it stays as it is for the next transition to end. With
    `alarm` (its kind: the target system itself refused, or an integrity fault), its owner is alerted
    too. Either way the refusal is logged with the approval and generation it met.
    """
    status = "needs_attention" if attention else ("needs_review" if review else None)
    with _noted_if_stale(lease, stage_id, rule, now=now), transaction.atomic(), connection.cursor() as cur:
        done = SQL.one(
            cur,
            "set_aside",
            **_fenced(
                lease,
                stage_id=stage_id,
                now=now,
                rule=rule,
                status=status,
                in_question=in_question,
                case_owner=custody.owner,
                open_question=custody.open_question,
                next_check_at=custody.next_check_at,
                action=f"refused at the receiving boundary: {rule}"
                if not in_question
                else f"its effect is in question: {rule}",
            ),
        )
        if done is None:
            raise _why_not(cur, lease, stage_id, "set it aside (only a running stage is refused)")
        _, op_id, stage = done
        if alarm:
            alarms.raise_alarm(
                request_id=lease.request_id,
                kind=alarm,
                message=f"{stage} (operation {op_id}) {'in question' if in_question else 'refused'}: {rule} "
                f"(owner {custody.owner})",
                now=now,
                stage_id=stage_id,
            )
        decisions.record(
            request_id=lease.request_id,
            actor=None,
            action="effect_in_question" if in_question else "boundary_refused",
            reason=f"{stage} (operation {op_id}): {rule}",
            now=now,
            approval_id=approval_id,
            generation=lease.generation,
        )
    event(
        logger,
        "effect_in_question" if in_question else "boundary_refused",
        logging.WARNING,
        request_id=lease.request_id,
        stage_id=stage_id,
        executor=lease.owner,
        generation=lease.generation,
        reason=rule,
    )


def clear_submitted(request_id: UUID) -> int:
    """An operator confirmed the submitted effect was never applied (call under the request lock)."""
    with connection.cursor() as cur:
        return SQL.run(cur, "clear_submitted", request_id=request_id)


def record_by_hand(
    request_id: UUID,
    *,
    operation_id: UUID,
    stage: str,
    applied: bool,
    has_agents: bool | None,
    evidence: str,
    by: str,
    now: datetime,
    attempt: int | None,
    corrects: int | None = None,
) -> int:
    """What an operator did by hand for the effect handed over at `attempt`, or an approver's
    correction of the record `corrects` (call under the request lock). Its id."""
    with connection.cursor() as cur:
        row = SQL.one(
            cur,
            "record_by_hand",
            request_id=request_id,
            operation_id=operation_id,
            stage=stage,
            applied=applied,
            has_agents=has_agents,
            evidence=evidence,
            by=by,
            now=now,
            attempt=attempt,
            corrects=corrects,
        )
    assert row is not None  # an INSERT returns its row
    return int(row[0])


class _Locked:
    __slots__ = ("cancel_requested", "current", "next_attempt_at", "open_question", "owner", "retry_count", "status")

    def __init__(self, row: tuple[Any, ...]) -> None:
        (_, _, self.status, self.cancel_requested, self.retry_count, self.next_attempt_at, self.open_question,
         self.owner) = row[:8]  # fmt: skip
        self.current = snapshot(row[8:]) if row[8] is not None else None


def _lock(cur: Any, lease: Lease) -> _Locked:
    """Lock the request with its current row and check the lease (inside atomic())."""
    row = SQL.one(cur, "lock_for_transition", request_id=lease.request_id)
    if row is None:
        raise UnknownRequest(f"no deletion request with id {lease.request_id}")
    check_owner(lease, row[0], row[1])
    return _Locked(row)


def transition_stage(lease: Lease, decide: Decide, *, now: datetime, replay: bool = True) -> NextStage:
    """Lock → decide → apply, in one transaction. With `replay`, `decide` gets the whole history
    (and the request's inventory) to reconstruct from; without, only the current row: the caller's
    `decide` already knows the approved plan."""
    with transaction.atomic(), connection.cursor() as cur:
        locked = _lock(cur, lease)
        if locked.status in _PARKED:
            # Terminal, or parked for a person: nothing runs until someone acts.
            return Finished(status=locked.status, completed_stages=_count(cur, lease), note=locked.open_question)
        inventory: dict[str, Any] | None = None
        version = 0
        if replay:
            history = selectors.load_history(lease.request_id, MAX_STAGES)
            if len(history) > MAX_STAGES:
                raise WorkflowError(
                    f"request {lease.request_id} has more than {MAX_STAGES:,} stages; refusing to reconstruct"
                )
            cur.execute(
                "SELECT inventory_json, inventory_version FROM entity_deletion_requests WHERE id = %s",
                [lease.request_id],
            )
            raw, version = cur.fetchone()
            inventory = json.loads(raw) if isinstance(raw, str) else raw
        else:
            history = [locked.current] if locked.current is not None else []
        request = RequestSnapshot(
            id=lease.request_id,
            status=locked.status,
            inventory=inventory,
            inventory_version=version,
            retry_count=locked.retry_count,
            next_attempt_at=locked.next_attempt_at,
            cancel_requested=locked.cancel_requested,
        )
        operation = decide(request, history, now)
        result = _apply(cur, lease, locked, bool(history), operation, now)
    reason = type(operation).__name__ if not isinstance(result, Finished) else f"finished {result.status}"
    if not isinstance(operation, Initialize):  # a new first row says so in `start`
        _transition_event(lease, getattr(result, "id", None), getattr(result, "stage", None), reason)
    return result


def _transition_event(lease: Lease, stage_id: Any, stage: str | None, reason: str) -> None:
    event(
        logger,
        "transition",
        request_id=lease.request_id,
        executor=lease.owner,
        generation=lease.generation,
        stage_id=stage_id,
        stage=stage,
        reason=reason,
    )


def _count(cur: Any, lease: Lease) -> int:
    return int(SQL.one(cur, "count_completed", request_id=lease.request_id)[0])  # type: ignore[index]


def _cancel_at_boundary(cur: Any, lease: Lease, current: StageSnapshot | None, now: datetime) -> Finished:
    """Stop at a transition: completed stages stay completed and are reported as done, naming the
    last operation the target system recorded."""
    done = _count(cur, lease)
    if done == 0:
        action = "cancelled before any effect"
    else:
        last = current if current is not None and current.status == "completed" else None
        applied = (
            f"operation {last.operation_id} ({last.stage}) was applied (evidence: {_words(last.evidence)})"
            if last is not None
            else f"{done} stage(s) were applied"
        )
        action = (
            f"cancelled after {applied}; {done} completed stage(s) stay done; "
            "reversal needs a separate authorized action"
        )
    if SQL.one(cur, "cancel_at_boundary", **_fenced(lease, now=now, action=action)) is None:
        raise _why_not(cur, lease, None, "cancel it at a stage boundary")
    return Finished(status="cancelled", completed_stages=done)


def _words(evidence: dict[str, Any]) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in evidence.items()) or "recorded"


def _apply(cur: Any, lease: Lease, locked: _Locked, started: bool, op: Operation, now: datetime) -> NextStage:
    current, status = locked.current, locked.status
    if isinstance(op, EndCancelled):
        return _cancel_at_boundary(cur, lease, current, now)
    if started and status == "approved" and not isinstance(op, Initialize):
        # A fresh approval after a review: the saved stage continues, completed ones stay done.
        SQL.run(cur, "resume_approved", **_fenced(lease, now=now))
        status = "running"
    if isinstance(op, AlreadyFinished):
        if status != "completed":
            raise WorkflowError(f"decision says finished but request {lease.request_id} is {status}")
        return Finished(status=status, completed_stages=_count(cur, lease))
    if isinstance(op, WaitUntil):
        if status != "retry_wait":
            raise WorkflowError(f"decision says wait but request {lease.request_id} is {status}")
        return op
    if isinstance(op, Initialize):
        first = None
        if not started and status == "approved":
            first = _start_request(cur, lease, op.first, now)
        if first is None:
            raise WorkflowError(
                f"request {lease.request_id} ({status}) already has stage(s) but no current stage; "
                "refusing to create a second initial stage"
            )
        _transition_event(lease, first[0], op.first.stage, "Initialize")
        return snapshot(first)
    if isinstance(op, Resume):
        if current is None or current.id != op.stage_id or current.status == "completed":
            raise WorkflowError(f"cannot resume stage {op.stage_id}: it is not the unfinished current stage")
        if status not in ("running", "retry_wait"):
            raise WorkflowError(f"cannot resume a stage of request {lease.request_id} in status {status}")
        if current.status == "failed" and locked.next_attempt_at and locked.next_attempt_at > now:
            raise RetryNotDue(
                f"retry of stage {current.id} is not due until {present.absolute(locked.next_attempt_at)}"
            )
        return current
    if isinstance(op, Advance):
        if current is None or current.id != op.completed_stage_id or current.status != "completed":
            raise WorkflowError(
                f"cannot advance from stage {op.completed_stage_id}: it is not the completed current stage"
            )
        if status != "running":
            raise WorkflowError(f"cannot advance request {lease.request_id} in status {status}")
        moved = _advance(cur, lease, current.stage, op, now)
        if moved is None:
            raise _why_not(cur, lease, current.id, "advance from it")
        return moved
    raise WorkflowError(f"unknown operation {op!r}")


def _advance(cur: Any, lease: Lease, stage: str, op: Advance, now: datetime) -> NextStage | None:
    """Retire the completed current row with its decision; insert its successor, or complete the
    request and release its lease. None when the fenced statement found nothing."""
    step, params = _step(lease, stage, op, now)
    cur.execute(step, params)
    moved = cur.fetchone()
    return _moved(lease, op, moved) if moved is not None else None


def _step(lease: Lease, stage: str, op: Advance, now: datetime) -> tuple[str, dict[str, Any]]:
    """The statement that writes the rules' next step from a completed current row, and its parameters:
    `complete` (the request completed, its lease released) or `advance` (the successor inserted)."""
    decision = json.dumps(op.decision)
    if op.successor is None:
        return SQL.sql("complete"), _fenced(
            lease, stage_id=op.completed_stage_id, decision=decision, now=now, action=f"completed after {stage}"
        )
    return SQL.sql("advance"), _fenced(
        lease, **_new_row(lease, op.successor, op.completed_stage_id), stage_id=op.completed_stage_id,
        decision=decision, now=now, action=f"{stage} → {op.successor.stage}",
    )  # fmt: skip


def _moved(lease: Lease, op: Advance, row: tuple[Any, ...]) -> NextStage:
    """What the step wrote: the successor, or the request completed (its lease released)."""
    if op.successor is None:
        event(logger, "release", request_id=lease.request_id, executor=lease.owner, generation=lease.generation)
        return Finished(status="completed", completed_stages=int(row[0]), lease_released=True)
    return snapshot(row)


OPERATION_NAMESPACE = UUID("6f1c2a4e-0d7b-5c3a-9e51-2b8f4d6a7c90")


def operation_id(request_id: UUID, stage: str, community_id: str | None) -> UUID:
    """The same intended effect always gets the same id, even if a restored backup
    makes the workflow insert its row again: the target system then recognises it."""
    return uuid5(OPERATION_NAMESPACE, f"{request_id}:{stage}:{community_id or ''}")
