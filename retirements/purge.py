"""The purge executor: a dummy purge on real rows, applied once per operation id."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from retirements import store
from retirements.models import PurgeStatus


def run_purge(job_id: int, *, now: datetime) -> str:
    """Apply the purge and check its operation id in one transaction."""
    with transaction.atomic():
        locked = store.lock_purge(job_id)
        if locked is None:
            return f"no purge job {job_id}"
        request, workspace, job = locked
        if job.status == PurgeStatus.DONE:
            return f"purge {job.operation_id} already done"
        store.apply_purge(request, workspace, job, now=now)
        return f"purge {job.operation_id} done"
