"""Handler outcomes and atomic stage transitions. Knows no stage names.

`transition_stage(lease, decide)` locks the parent, loads the history, calls
the pure `decide` while holding the lock, checks the returned operation
against the lifecycle, applies it and commits. An error from `decide` rolls
the whole transaction back.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4, uuid5

from django.db import connection, transaction

from core.logs import event
from core.store import fsm_target
from deletions.errors import RetryNotDue, StaleLease, WorkflowError
from deletions.models import DeletionRequest, StageAttempt, StageHistory, StageStatus, Status
from deletions.store import alarms, decisions
from deletions.store.leases import lock_owned
from deletions.store.requests import load_history, request_snapshot, stage_snapshot
from deletions.store.types import (
    APPROVERS,
    GROUP_OWNERS,
    OPERATORS_ON_CALL,
    SYSTEM,
    Advance,
    AlreadyFinished,
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

MAX_STAGES = 10_000
logger = logging.getLogger("deletions")

Decide = Callable[[RequestSnapshot, list[StageSnapshot], datetime], Operation]
RetryPolicy = Callable[[int, datetime], RetryDecision]


def _lock_current_row(req: DeletionRequest, stage_id: UUID) -> StageHistory:
    row = StageHistory.objects.select_for_update().filter(id=stage_id, request=req).first()
    if row is None:
        raise WorkflowError(f"stage {stage_id} does not belong to request {req.id}")
    if not row.is_current:
        raise StaleLease(f"stage {stage_id} ({row.stage}) is no longer the current stage of request {req.id}")
    return row


def lock_current(req: DeletionRequest) -> StageHistory | None:
    """The request's current stage row, locked (inside atomic(), after the request)."""
    return StageHistory.objects.select_for_update().filter(request=req, is_current=True).first()


def clear_submitted(row: StageHistory) -> None:
    """An operator confirmed the submitted effect was never applied: the next attempt may submit it."""
    row.submitted_at = None
    row.save(update_fields=["submitted_at"])


def mark_running(lease: Lease, stage_id: UUID, *, now: datetime) -> StageSnapshot:
    """Mark the current row running; a retried row keeps its first started_at."""
    with transaction.atomic():
        req = lock_owned(lease)
        row = _lock_current_row(req, stage_id)
        if row.status == StageStatus.COMPLETED:
            raise WorkflowError(f"stage {row.id} ({row.stage}) already completed; its handler is not run again")
        row.run()
        row.started_at = row.started_at or now
        row.attempts += 1
        row.save(update_fields=["status", "started_at", "attempts"])
        _open_attempt(lease, row, now)
        if req.status == Status.RETRY_WAIT:
            req.retry()
        req.last_action = f"{lease.owner} (generation {lease.generation}) started {row.stage}"
        req.updated_at = now
        req.save(update_fields=["status", "last_action", "updated_at"])
        return stage_snapshot(row)


ATTENTION_CHECK = timedelta(hours=1)


def _person_or_on_call(owner: str) -> str:
    """A case that waits on a person keeps a named person (one who resumed it), else the group on call."""
    return owner if owner and owner not in GROUP_OWNERS else OPERATORS_ON_CALL


def _open_attempt(lease: Lease, row: StageHistory, now: datetime) -> None:
    """An attempt still open from an earlier worker was interrupted; this one starts."""
    StageAttempt.objects.filter(stage=row, outcome=StageAttempt.Outcome.RUNNING).update(
        outcome=StageAttempt.Outcome.INTERRUPTED, finished_at=now
    )
    StageAttempt.objects.create(
        request_id=row.request_id,
        stage=row,
        attempt=row.attempts,
        executor=lease.owner,
        generation=lease.generation,
        started_at=now,
    )


def _close_attempt(row: StageHistory, outcome: str, error: str, now: datetime) -> None:
    StageAttempt.objects.filter(stage=row, attempt=row.attempts).update(outcome=outcome, error=error, finished_at=now)


class _Changed(Exception):
    """The row was not as the hand-written path expects: roll back and take the general path."""


def begin(lease: Lease, row: StageSnapshot, *, now: datetime, submit: bool) -> tuple[StageSnapshot, bool]:
    """The running mark (with the submitted mark when `submit`: nothing happens between the two)
    in one transaction. Returns the row and whether an earlier attempt had already submitted.

    A fresh pending row of a running request takes three statements through the cursor; any
    other row (a retry, a takeover, a row submitted before) goes through `mark_running`.
    """
    if row.status == StageStatus.PENDING and row.submitted_at is None:
        running = fsm_target(StageHistory.run, StageStatus.PENDING)
        try:
            with transaction.atomic(), connection.cursor() as cur:
                cur.execute(
                    "UPDATE entity_deletion_requests SET last_action = %s, updated_at = %s"
                    " WHERE id = %s AND lease_owner = %s AND lease_generation = %s AND status = %s",
                    [
                        f"{lease.owner} (generation {lease.generation}) started {row.stage}",
                        now,
                        lease.request_id,
                        lease.owner,
                        lease.generation,
                        Status.RUNNING,
                    ],
                )
                if cur.rowcount != 1:
                    raise _Changed
                cur.execute(
                    "UPDATE entity_deletion_stage_history SET status = %s, started_at = COALESCE(started_at, %s),"
                    " attempts = attempts + 1, submitted_at = %s"
                    " WHERE id = %s AND request_id = %s AND is_current AND status = %s AND submitted_at IS NULL"
                    " RETURNING attempts, started_at",
                    [running, now, now if submit else None, row.id, lease.request_id, StageStatus.PENDING],
                )
                saved = cur.fetchone()
                if saved is None:
                    raise _Changed
                attempts, started_at = saved
                if attempts > 1:  # set aside before: its attempts are closed, but keep the rule of `_open_attempt`
                    cur.execute(
                        "UPDATE entity_deletion_stage_attempts SET outcome = %s, finished_at = %s"
                        " WHERE stage_id = %s AND outcome = %s",
                        [StageAttempt.Outcome.INTERRUPTED, now, row.id, StageAttempt.Outcome.RUNNING],
                    )
                cur.execute(
                    "INSERT INTO entity_deletion_stage_attempts"
                    " (request_id, stage_id, attempt, executor, generation, started_at, outcome, error)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, '')",
                    [
                        lease.request_id,
                        row.id,
                        attempts,
                        lease.owner,
                        lease.generation,
                        now,
                        StageAttempt.Outcome.RUNNING,
                    ],
                )
            return replace(
                row, status=running, attempts=attempts, started_at=started_at, submitted_at=now if submit else None
            ), False
        except _Changed:
            pass
    started = mark_running(lease, row.id, now=now)
    if started.submitted_at is not None:
        return started, True
    if submit:
        return mark_submitted(lease, row.id, now=now), False
    return started, False


def initialize(lease: Lease, first: NewStage, *, now: datetime) -> StageSnapshot | None:
    """Start an approved request with no history: the request moves to running and its first
    row is inserted, in one transaction of two statements. None, with nothing written, when
    the request is not approved under this lease with no stage and no cancellation: the caller
    takes the general path (`transition_stage`), which says why."""
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(
            "UPDATE entity_deletion_requests r SET status = %s, last_action = %s, updated_at = %s"
            " WHERE id = %s AND lease_owner = %s AND lease_generation = %s AND status = %s"
            " AND cancel_requested_at IS NULL"
            " AND NOT EXISTS (SELECT 1 FROM entity_deletion_stage_history s WHERE s.request_id = r.id)",
            [
                fsm_target(DeletionRequest.start, Status.APPROVED),
                f"initialized with {first.stage}",
                now,
                lease.request_id,
                lease.owner,
                lease.generation,
                Status.APPROVED,
            ],
        )
        if cur.rowcount != 1:
            return None
        first_row = _insert_row(cur, lease.request_id, first, previous=None, now=now)
    event(
        logger,
        "transition",
        request_id=lease.request_id,
        executor=lease.owner,
        generation=lease.generation,
        stage_id=first_row.id,
        stage=first.stage,
        reason="Initialize",
    )
    return first_row


def complete_and_advance(
    lease: Lease,
    row: StageSnapshot,
    result: dict[str, Any],
    decision: dict[str, Any],
    successor: NewStage | None,
    *,
    now: datetime,
) -> NextStage | None:
    """The result saved, the row retired with its decision, and the successor inserted (or, with
    none, the request completed): one transaction, four statements. None, with nothing written,
    when the request is not simply running under this lease (a cancellation, a lost lease) or the
    row is not the running current one: the caller takes the general path, which names what changed."""
    completed = fsm_target(StageHistory.succeed, StageStatus.RUNNING)
    try:
        with transaction.atomic(), connection.cursor() as cur:
            if successor is not None:
                finish, action = "", f"{row.stage} → {successor.stage}"
                params: list[Any] = [now, action, now]
            else:  # completed: the lease is released in the same transaction
                finish = ", status = %s, completed_at = %s, lease_owner = NULL, lease_expires_at = NULL"
                action = f"completed after {row.stage}"
                params = [None, action, now, fsm_target(DeletionRequest.complete, Status.RUNNING), now]
            cur.execute(
                "UPDATE entity_deletion_requests SET retry_count = 0, next_attempt_at = NULL, last_error = NULL,"
                f" open_question = '', next_check_at = %s, last_action = %s, updated_at = %s{finish}"
                " WHERE id = %s AND lease_owner = %s AND lease_generation = %s AND status = %s"
                " AND cancel_requested_at IS NULL",
                [*params, lease.request_id, lease.owner, lease.generation, Status.RUNNING],
            )
            if cur.rowcount != 1:
                raise _Changed
            cur.execute(
                "UPDATE entity_deletion_stage_history SET status = %s, finished_at = %s, last_error = NULL,"
                " is_current = false, metadata_json = metadata_json || %s::jsonb"
                " WHERE id = %s AND request_id = %s AND is_current AND status = %s",
                [
                    completed,
                    now,
                    json.dumps({"result": result, "decision": decision}),
                    row.id,
                    lease.request_id,
                    StageStatus.RUNNING,
                ],
            )
            if cur.rowcount != 1:
                raise _Changed
            cur.execute(
                "UPDATE entity_deletion_stage_attempts SET outcome = %s, error = '', finished_at = %s"
                " WHERE stage_id = %s AND attempt = %s",
                [StageAttempt.Outcome.COMPLETED, now, row.id, row.attempts],
            )
            if row.attempts > 1:
                alarms.resolve(request_id=lease.request_id, kind=alarms.EFFECT_UNKNOWN, now=now)
            if successor is None:
                cur.execute(
                    "SELECT count(*) FROM entity_deletion_stage_history WHERE request_id = %s AND status = %s",
                    [lease.request_id, completed],
                )
                done = Finished(status=Status.COMPLETED, completed_stages=cur.fetchone()[0], lease_released=True)
                cur.execute(
                    "INSERT INTO entity_deletion_lease_events (request_id, event, owner, generation, at)"
                    " VALUES (%s, 'release', %s, %s, %s)",
                    [lease.request_id, lease.owner, lease.generation, now],
                )
            else:
                nxt = _insert_row(cur, lease.request_id, successor, previous=row.id, now=now)
    except _Changed:
        return None
    event(
        logger,
        "transition",
        request_id=lease.request_id,
        executor=lease.owner,
        generation=lease.generation,
        stage_id=nxt.id if successor else None,
        stage=successor.stage if successor else None,
        reason="Advance" if successor else "finished completed",
    )
    if successor is None:
        event(logger, "release", request_id=lease.request_id, executor=lease.owner, generation=lease.generation)
        return done
    return nxt


def _insert_row(cur: Any, request_id: UUID, new: NewStage, *, previous: UUID | None, now: datetime) -> StageSnapshot:
    """Insert a pending current row (inside the caller's transaction) and return it as saved."""
    row_id = uuid4()
    metadata = {"inputs": new.inputs, "previous_stage_id": str(previous) if previous else None}
    op_id = operation_id(request_id, new.stage, new.community_id)
    cur.execute(
        "INSERT INTO entity_deletion_stage_history (id, request_id, stage, target_community_id, status,"
        " is_current, metadata_json, operation_id, attempts, created_at)"
        " VALUES (%s, %s, %s, %s, %s, true, %s::jsonb, %s, 0, %s)",
        [row_id, request_id, new.stage, new.community_id, StageStatus.PENDING, json.dumps(metadata), op_id, now],
    )
    return StageSnapshot(
        id=row_id,
        stage=new.stage,
        community_id=new.community_id,
        status=StageStatus.PENDING,
        is_current=True,
        metadata=metadata,
        started_at=None,
        finished_at=None,
        last_error=None,
        operation_id=op_id,
        attempts=0,
    )


def mark_submitted(lease: Lease, stage_id: UUID, *, now: datetime) -> StageSnapshot:
    """Saved before the effect is first submitted, under the lease: a crash after this
    point leaves the effect unknown, to be settled from the target system's record."""
    with transaction.atomic():
        req = lock_owned(lease)
        row = _lock_current_row(req, stage_id)
        if row.status != StageStatus.RUNNING:
            raise WorkflowError(f"stage {row.id} is {row.status}, not running: nothing may be submitted")
        row.submitted_at = row.submitted_at or now
        row.save(update_fields=["submitted_at"])
        return stage_snapshot(row)


def save_success(lease: Lease, stage_id: UUID, result: dict[str, Any], *, now: datetime) -> StageSnapshot:
    """completed + current: the handler finished; the transition is still to come."""
    with transaction.atomic():
        req = lock_owned(lease)
        row = _lock_current_row(req, stage_id)
        if row.status != StageStatus.RUNNING:
            raise WorkflowError(f"stage {row.id} is {row.status}, not running: its result cannot be saved")
        row.succeed()
        row.finished_at = now
        row.last_error = None
        row.metadata_json = {**row.metadata_json, "result": result}
        row.save(update_fields=["status", "finished_at", "last_error", "metadata_json"])
        _close_attempt(row, StageAttempt.Outcome.COMPLETED, "", now)
        alarms.resolve(request_id=req.id, kind=alarms.EFFECT_UNKNOWN, now=now)  # settled from the record
        req.last_action = f"{lease.owner} (generation {lease.generation}) completed {row.stage}"
        req.updated_at = now
        req.save(update_fields=["last_action", "updated_at"])
        return stage_snapshot(row)


def set_aside(
    lease: Lease, stage_id: UUID, rule: str, *, review: bool, approval_id: UUID | None, now: datetime
) -> None:
    """The receiver refused the effect for want of authority; nothing was applied.

    The row goes back to pending (not a failure, no retry counted). With `review`,
    the request waits for a person: owner, open question, next check. Either way
    the refusal is logged with the approval and generation it met.
    """
    with transaction.atomic():
        req = lock_owned(lease)
        row = _lock_current_row(req, stage_id)
        row.set_aside()
        row.submitted_at = None
        row.save(update_fields=["status", "submitted_at"])
        _close_attempt(row, StageAttempt.Outcome.REFUSED, rule, now)
        if review:
            req.refuse_at_boundary()
            req.owner = APPROVERS
            req.open_question = f"{rule}; approve the same inventory again to resume, or cancel"
            req.next_check_at = now
            req.last_action = f"{row.stage} refused at the receiving boundary: {rule}"
            req.updated_at = now
            req.save(update_fields=["status", "owner", "open_question", "next_check_at", "last_action", "updated_at"])
        decisions.record(
            request_id=req.id,
            actor=None,
            action="boundary_refused",
            reason=f"{row.stage} (operation {row.operation_id}): {rule}",
            now=now,
            approval_id=approval_id,
            generation=lease.generation,
        )
    event(
        logger,
        "boundary_refused",
        logging.WARNING,
        request_id=lease.request_id,
        stage_id=stage_id,
        executor=lease.owner,
        generation=lease.generation,
        reason=rule,
    )


def save_failure(
    lease: Lease,
    stage_id: UUID,
    error: str,
    *,
    now: datetime,
    retry_policy: RetryPolicy,
    open_question: str = "",
) -> RetryDecision:
    """Row failed + current; parent retry_wait (or needs_attention) with a saved deadline."""
    with transaction.atomic():
        req = lock_owned(lease)
        row = _lock_current_row(req, stage_id)
        row.fail()
        row.last_error = error
        row.save(update_fields=["status", "last_error"])
        outcome = StageAttempt.Outcome.EFFECT_UNKNOWN if open_question else StageAttempt.Outcome.FAILED
        _close_attempt(row, outcome, error, now)
        failures = req.retry_count + 1
        decision = retry_policy(failures, now)
        if decision.needs_attention:
            req.escalate()
            req.owner = _person_or_on_call(req.owner)
            req.open_question = f"{row.stage} failed {failures} times in a row: {error}; resume or cancel"
            req.next_check_at = now + ATTENTION_CHECK  # a person looks within the hour; overdue after
        else:
            req.wait_for_retry()
            req.next_check_at = decision.next_attempt_at
            req.open_question = open_question
            req.owner = _person_or_on_call(req.owner) if open_question else SYSTEM
            if open_question:
                alarms.raise_alarm(
                    request_id=req.id,
                    kind=alarms.EFFECT_UNKNOWN,
                    message=f"{open_question} (owner {req.owner}, next check {decision.next_attempt_at})",
                    now=now,
                    stage_id=row.id,
                )
        req.retry_count = failures
        req.next_attempt_at = decision.next_attempt_at
        req.last_error = error
        req.last_action = f"{lease.owner} (generation {lease.generation}) failed {row.stage}: {error}"
        req.updated_at = now
        event(
            logger,
            "needs_attention" if decision.needs_attention else "retry",
            logging.WARNING,
            request_id=req.id,
            stage_id=row.id,
            stage=row.stage,
            executor=lease.owner,
            generation=lease.generation,
            reason=f"failure {failures}: {error}",
        )
        req.save(
            update_fields=[
                "status",
                "retry_count",
                "next_attempt_at",
                "last_error",
                "owner",
                "open_question",
                "next_check_at",
                "last_action",
                "updated_at",
            ]
        )
        return decision


def transition_stage(lease: Lease, decide: Decide, *, now: datetime) -> NextStage:
    with transaction.atomic():
        req = lock_owned(lease)
        history = load_history(req.id, MAX_STAGES)
        if len(history) > MAX_STAGES:
            raise WorkflowError(f"request {req.id} has more than {MAX_STAGES:,} stages; refusing to reconstruct")
        snapshot = request_snapshot(req)
        if snapshot.status in (Status.COMPLETED, Status.CANCELLED, Status.NEEDS_ATTENTION, Status.NEEDS_REVIEW):
            # Terminal, or parked for a person: nothing runs until someone acts.
            return Finished(status=snapshot.status, completed_stages=_completed(history), note=req.open_question)
        if snapshot.cancel_requested:
            return _finish_cancelled(req, history, now)
        operation = decide(snapshot, history, now)
        result = _apply(req, history, operation, now)
    event(
        logger,
        "transition",
        request_id=lease.request_id,
        executor=lease.owner,
        generation=lease.generation,
        stage_id=getattr(result, "id", None),
        stage=getattr(result, "stage", None),
        reason=type(operation).__name__ if not isinstance(result, Finished) else f"finished {result.status}",
    )
    return result


def _completed(history: list[StageSnapshot]) -> int:
    return sum(1 for s in history if s.status == StageStatus.COMPLETED)


def _finish_cancelled(req: DeletionRequest, history: list[StageSnapshot], now: datetime) -> Finished:
    """Stop at a transition: completed stages stay completed and are reported as done."""
    req.cancel()
    alarms.resolve(request_id=req.id, kind=alarms.EFFECT_UNKNOWN, now=now)
    req.next_attempt_at = None
    req.next_check_at = None
    req.open_question = ""
    req.last_action = f"cancelled at a stage boundary; {_completed(history)} stage(s) had completed"
    req.updated_at = now
    req.save(update_fields=["status", "next_attempt_at", "next_check_at", "open_question", "last_action", "updated_at"])
    return Finished(status=Status.CANCELLED, completed_stages=_completed(history))


def _current(history: list[StageSnapshot]) -> StageSnapshot | None:
    current = [s for s in history if s.is_current]
    if len(current) > 1:
        raise WorkflowError(f"{len(current)} current stages saved; expected at most one")
    return current[0] if current else None


def _apply(req: DeletionRequest, history: list[StageSnapshot], op: Operation, now: datetime) -> NextStage:
    current = _current(history)
    if history and req.status == Status.APPROVED:
        # A fresh approval after a review: the saved stage continues, completed ones stay done.
        req.resume_approved()
        req.updated_at = now
        req.save(update_fields=["status", "updated_at"])
    if isinstance(op, AlreadyFinished):
        if req.status != Status.COMPLETED:
            raise WorkflowError(f"decision says finished but request {req.id} is {req.status}")
        return Finished(status=req.status, completed_stages=_completed(history))
    if isinstance(op, WaitUntil):
        if req.status != Status.RETRY_WAIT:
            raise WorkflowError(f"decision says wait but request {req.id} is {req.status}")
        return op
    if isinstance(op, Initialize):
        if history or req.status != Status.APPROVED:
            raise WorkflowError(
                f"request {req.id} ({req.status}) already has {len(history)} stage(s) but no current stage; "
                "refusing to create a second initial stage"
            )
        row = _insert(req, op.first, previous=None, now=now)
        req.start()
        req.last_action = f"initialized with {op.first.stage}"
        req.updated_at = now
        req.save(update_fields=["status", "last_action", "updated_at"])
        return row
    if isinstance(op, Resume):
        if current is None or current.id != op.stage_id or current.status == StageStatus.COMPLETED:
            raise WorkflowError(f"cannot resume stage {op.stage_id}: it is not the unfinished current stage")
        if req.status not in (Status.RUNNING, Status.RETRY_WAIT):
            raise WorkflowError(f"cannot resume a stage of request {req.id} in status {req.status}")
        if current.status == StageStatus.FAILED and req.next_attempt_at and req.next_attempt_at > now:
            raise RetryNotDue(f"retry of stage {current.id} is not due until {req.next_attempt_at.isoformat()}")
        return current
    if isinstance(op, Advance):
        if current is None or current.id != op.completed_stage_id or current.status != StageStatus.COMPLETED:
            raise WorkflowError(
                f"cannot advance from stage {op.completed_stage_id}: it is not the completed current stage"
            )
        if req.status != Status.RUNNING:
            raise WorkflowError(f"cannot advance request {req.id} in status {req.status}")
        old = StageHistory.objects.get(id=current.id)
        old.is_current = False
        old.metadata_json = {**old.metadata_json, "decision": op.decision}
        old.save(update_fields=["is_current", "metadata_json"])
        retry_cleared = {"retry_count": 0, "next_attempt_at": None, "last_error": None, "open_question": ""}
        for name, value in retry_cleared.items():
            setattr(req, name, value)
        fields = [*retry_cleared, "last_action", "updated_at", "next_check_at"]
        result: NextStage
        if op.successor is None:
            req.complete()
            req.completed_at = now
            req.next_check_at = None
            req.last_action = f"completed after {current.stage}"
            fields += ["status", "completed_at"]
            result = Finished(status=Status.COMPLETED, completed_stages=_completed(history))
        else:
            result = _insert(req, op.successor, previous=current.id, now=now)
            req.next_check_at = now
            req.last_action = f"{current.stage} → {op.successor.stage}"
        req.updated_at = now
        req.save(update_fields=fields)
        return result
    raise WorkflowError(f"unknown operation {op!r}")


OPERATION_NAMESPACE = UUID("6f1c2a4e-0d7b-5c3a-9e51-2b8f4d6a7c90")


def operation_id(request_id: UUID, stage: str, community_id: str | None) -> UUID:
    """The same intended effect always gets the same id, even if a restored backup
    makes the workflow insert its row again: the target system then recognises it."""
    return uuid5(OPERATION_NAMESPACE, f"{request_id}:{stage}:{community_id or ''}")


def _insert(req: DeletionRequest, new: NewStage, *, previous: UUID | None, now: datetime) -> StageSnapshot:
    row = StageHistory.objects.create(
        request=req,
        operation_id=operation_id(req.id, new.stage, new.community_id),
        stage=new.stage,
        target_community_id=new.community_id,
        status=StageStatus.PENDING,
        is_current=True,
        metadata_json={"inputs": new.inputs, "previous_stage_id": str(previous) if previous else None},
        created_at=now,
    )
    return stage_snapshot(row)
