"""The purge job: its lease, its receiving boundary's facts and its outcome."""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID

from django.db import connection

from core import authority
from core.authority import Actor
from core.sql import Statements
from retirements.contract import PURGE_REFUSED_ALARM, STALE_EXECUTOR_ALARM, PurgeFacts
from retirements.models import PurgeJob, RetirementRequest, Workspace
from retirements.store.decisions import log_decision, raise_alarm, resolve_alarms
from retirements.store.locks import lock_request
from retirements.store.requests import cover, may_hold, on_call

SQL = Statements.beside(__file__, "purge.sql")


def claim_purge(job_id: int, *, owner: str, now: datetime, lease_seconds: int) -> int | None:
    """Take the purge job's lease with a new generation (one fenced statement); None when held or done."""
    with connection.cursor() as cur:
        row = SQL.one(cur, "claim", job_id=job_id, owner=owner, now=now, expires=now + timedelta(seconds=lease_seconds))
    return int(row[0]) if row is not None else None


def lock_purge(job_id: int) -> tuple[RetirementRequest, Workspace, PurgeJob] | None:
    request_id = PurgeJob.objects.filter(id=job_id).values_list("request_id", flat=True).first()
    if request_id is None:
        return None
    request, workspace = lock_request(request_id)
    return request, workspace, PurgeJob.objects.select_for_update().get(id=job_id)


def purge_facts(
    request: RetirementRequest, job: PurgeJob, *, owner: str, generation: int, operation_id: UUID, now: datetime
) -> PurgeFacts:
    requester = type(request.requested_by).objects.get(pk=request.requested_by_id)  # fresh: active flag, groups
    return PurgeFacts(
        job_status=job.status,
        holder=job.lease_owner or "",
        holder_generation=job.lease_generation,
        owner=owner,
        generation=generation,
        job_operation_id=job.operation_id,
        operation_id=operation_id,
        request_status=request.status,
        requester=requester.get_username(),
        requester_may=authority.may(requester, "retirements.request_retirement"),
    )


def apply_purge(
    request: RetirementRequest, workspace: Workspace, job: PurgeJob, *, generation: int, now: datetime
) -> None:
    """Under the locks the boundary holds, its verdict applied: workspace deleted, job done,
    request completed, in one statement fenced by the job's owner and generation."""
    conclusion = f"workspace deleted by purge operation {job.operation_id}"
    with connection.cursor() as cur:
        done = SQL.one(
            cur, "purged", job_id=job.id, owner=job.lease_owner, generation=generation, now=now, conclusion=conclusion
        )
    if done is None:
        raise ValueError(f"purge job {job.id} is not the queued job of generation {generation}: nothing purged")
    _log_purge(request, workspace, "purged", f"operation {job.operation_id}", generation, now)


def refuse_purge(
    request: RetirementRequest, workspace: Workspace, job: PurgeJob, *, rule: str, generation: int, now: datetime
) -> None:
    """The receiving boundary refused for want of authority: nothing purged, a person must look."""
    action = f"purge refused at the receiving boundary: {rule}"
    with connection.cursor() as cur:
        done = SQL.one(
            cur,
            "refused",
            job_id=job.id,
            owner=job.lease_owner,
            generation=generation,
            now=now,
            rule=rule,
            action=action,
            **_held_by(request, on_call(not_user_id=request.requested_by_id) or request.owner_id),
        )
    if done is None:
        raise ValueError(f"purge job {job.id} is not the queued job of generation {generation}: nothing refused")
    raise_alarm(kind=PURGE_REFUSED_ALARM, request=request, message=rule, now=now)
    _log_purge(request, workspace, "purge_refused", rule, generation, now)


def retry_refused(request: RetirementRequest, workspace: Workspace, job: PurgeJob, *, actor: Actor, reason: str,
                  now: datetime) -> None:  # fmt: skip
    """The refused job queued again (one statement), its alarm resolved and the decision logged."""
    with connection.cursor() as cur:
        owner = actor.user.pk if may_hold(actor.user.pk) else request.owner_id
        done = SQL.one(cur, "retry", job_id=job.id, now=now, action=f"purge retried by {actor.name}: {reason}",
                       **_held_by(request, owner))  # fmt: skip
    if done is None:
        raise ValueError(f"purge job {job.id} is not a refused job of an executing request: nothing retried")
    resolve_alarms(kind=PURGE_REFUSED_ALARM, request=request, now=now)
    log_decision(request=request, workspace=workspace, actor=actor, action="retry_purge", reason=reason, now=now)


def close_refused(request: RetirementRequest, workspace: Workspace, job: PurgeJob, *, actor: Actor, reason: str,
                  now: datetime) -> None:  # fmt: skip
    """Request closed without purge and workspace back to disabled (one statement), alarm resolved."""
    conclusion = f"closed without purge by {actor.name} after the purge was refused: {reason}"
    with connection.cursor() as cur:
        done = SQL.one(cur, "close_refused", job_id=job.id, actor=actor.user.pk, now=now, conclusion=conclusion)
    if done is None:
        raise ValueError(f"purge job {job.id} is not a refused job of an executing request: nothing closed")
    resolve_alarms(kind=PURGE_REFUSED_ALARM, request=request, now=now)
    log_decision(request=request, workspace=workspace, actor=actor, action="close_refused", reason=reason, now=now)


def reject_stale_purge(
    request: RetirementRequest, workspace: Workspace, *, rule: str, generation: int, now: datetime
) -> None:
    """A late executor (its lease taken over, or the job no longer its to apply) was rejected at the
    receiving boundary: nothing purged by it, logged, and an alarm tells a person (one open per
    case), since an executor paused past its lease is a worker that stopped or starved."""
    _log_purge(request, workspace, "purge_rejected", rule, generation, now)
    raise_alarm(
        kind=STALE_EXECUTOR_ALARM,
        request=request,
        message=(
            f"a late purge executor was rejected at the receiving boundary, nothing purged by it: {rule}; "
            "find why it paused past its lease (a stopped, suspended or starved worker)"
        ),
        now=now,
    )


def _log_purge(
    request: RetirementRequest, workspace: Workspace, action: str, reason: str, generation: int, now: datetime
) -> None:
    log_decision(
        request=request,
        workspace=workspace,
        actor=None,
        action=action,
        reason=reason,
        now=now,
        system="purge",
        generation=generation,
    )


def _held_by(request: RetirementRequest, owner: int | None) -> dict[str, int | None]:
    """Who holds the case from now on, and the backup beside them (`requests.cover`)."""
    return {"case_owner": owner, "backup": cover(request, owner=owner)}
