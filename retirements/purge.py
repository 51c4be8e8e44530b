"""The purge executor: a dummy purge on real rows, applied once per operation id."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from retirements.models import PurgeJob, PurgeStatus, RetirementRequest, Workspace
from retirements.records import log_decision


def run_purge(job_id: int, *, now: datetime) -> str:
    """Apply the purge and check its operation id in one transaction."""
    request_id = PurgeJob.objects.filter(id=job_id).values_list("request_id", flat=True).first()
    if request_id is None:
        return f"no purge job {job_id}"
    with transaction.atomic():
        workspace_id = RetirementRequest.objects.values_list("workspace_id", flat=True).get(id=request_id)
        workspace = Workspace.objects.select_for_update().get(id=workspace_id)
        request = RetirementRequest.objects.select_for_update().get(id=request_id)
        job = PurgeJob.objects.select_for_update().get(id=job_id)
        if job.status == PurgeStatus.DONE:
            return f"purge {job.operation_id} already done"
        workspace.mark_deleted()
        workspace.save(update_fields=["lifecycle"])
        job.status = PurgeStatus.DONE
        job.finished_at = now
        job.save(update_fields=["status", "finished_at"])
        request.complete()
        request.concluded_at = now
        request.conclusion = f"workspace deleted by purge operation {job.operation_id}"
        request.last_action = request.conclusion
        request.updated_at = now
        request.save(update_fields=["status", "concluded_at", "conclusion", "last_action", "updated_at"])
        log_decision(
            request=request,
            workspace=workspace,
            actor=None,
            action="purged",
            reason=f"operation {job.operation_id}",
            now=now,
        )
        return f"purge {job.operation_id} done"
