"""The purge job: its lease, its receiving boundary's facts and its outcome."""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID

from django.db.models import F, Q

from core import authority
from retirements.contract import PurgeFacts
from retirements.models import PurgeJob, PurgeStatus, RetirementRequest, Workspace
from retirements.store.decisions import log_decision, raise_alarm
from retirements.store.locks import lock_request


def claim_purge(job_id: int, *, owner: str, now: datetime, lease_seconds: int) -> int | None:
    """Take the purge job's lease with a new generation (a conditional update); None when held or done."""
    free = Q(lease_owner__isnull=True) | Q(lease_expires_at__lte=now)
    claimed = PurgeJob.objects.filter(free, id=job_id, status=PurgeStatus.QUEUED).update(
        lease_owner=owner,
        lease_generation=F("lease_generation") + 1,
        lease_expires_at=now + timedelta(seconds=lease_seconds),
    )
    if not claimed:
        return None
    return PurgeJob.objects.values_list("lease_generation", flat=True).get(id=job_id)


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
    workspace.mark_deleted()
    workspace.save(update_fields=["lifecycle"])
    job.finish()
    job.finished_at = now
    job.lease_owner, job.lease_expires_at = None, None
    job.save(update_fields=["status", "finished_at", "lease_owner", "lease_expires_at"])
    request.complete()
    request.concluded_at = now
    request.conclusion = f"workspace deleted by purge operation {job.operation_id}"
    request.last_action = request.conclusion
    request.updated_at = now
    request.save(update_fields=["status", "concluded_at", "conclusion", "last_action", "updated_at"])
    _log_purge(request, workspace, "purged", f"operation {job.operation_id}", generation, now)


def refuse_purge(
    request: RetirementRequest, workspace: Workspace, job: PurgeJob, *, rule: str, generation: int, now: datetime
) -> None:
    """The receiving boundary refused for want of authority: nothing purged, a person must look."""
    job.refuse()
    job.refusal = rule
    job.lease_owner, job.lease_expires_at = None, None
    job.save(update_fields=["status", "refusal", "lease_owner", "lease_expires_at"])
    request.last_action = f"purge refused at the receiving boundary: {rule}"
    request.updated_at = now
    request.save(update_fields=["last_action", "updated_at"])
    raise_alarm(kind="purge_refused", request=request, message=rule, now=now)
    _log_purge(request, workspace, "purge_refused", rule, generation, now)


def log_stale_purge(
    request: RetirementRequest, workspace: Workspace, *, rule: str, generation: int, now: datetime
) -> None:
    _log_purge(request, workspace, "purge_rejected", rule, generation, now)


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
