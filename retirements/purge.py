"""The purge executor and its receiving boundary: a dummy purge on real rows.

The executor takes the job's lease (owner + a new generation), then applies
through one transaction that locks workspace, request and job and rechecks, with
the effect: the fencing token, the operation id, the request still executing,
and the requester's current authority (`policy.purge_verdict`). A late original
executor is rejected (logged, and an alarm raised); a repeated operation returns
the first outcome.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime

from django.conf import settings
from django.db import transaction

from core.crashpoints import crash_point
from retirements import policy
from retirements.store import purge as store_purge


def executor_id() -> str:
    return f"purge:{socket.gethostname()}:{os.getpid()}"


def run_purge(job_id: int, *, now: datetime, owner: str | None = None) -> str:
    owner = owner or executor_id()
    generation = store_purge.claim_purge(
        job_id, owner=owner, now=now, lease_seconds=settings.RETIREMENT_PURGE_LEASE_SECONDS
    )
    if generation is None:
        return f"purge job {job_id} not claimed: held by another executor, done or refused"
    crash_point("purge-claimed")
    return apply(job_id, owner=owner, generation=generation, now=now)


def apply(job_id: int, *, owner: str, generation: int, now: datetime) -> str:
    """The receiving boundary: every check and the effect in one transaction."""
    with transaction.atomic():
        locked = store_purge.lock_purge(job_id)
        if locked is None:
            return f"no purge job {job_id}"
        request, workspace, job = locked
        operation_id = job.operation_id
        verdict = policy.purge_verdict(
            store_purge.purge_facts(
                request, job, owner=owner, generation=generation, operation_id=operation_id, now=now
            )
        )
        if verdict.action == policy.ALREADY_DONE:
            return f"purge {operation_id} already done"
        if verdict.action == policy.STALE:
            store_purge.reject_stale_purge(request, workspace, rule=verdict.reason, generation=generation, now=now)
            return f"purge {operation_id} rejected: {verdict.reason}"
        if verdict.action == policy.REFUSE:
            store_purge.refuse_purge(request, workspace, job, rule=verdict.reason, generation=generation, now=now)
            return f"purge {operation_id} refused: {verdict.reason}"
        store_purge.apply_purge(request, workspace, job, generation=generation, now=now)
        return f"purge {operation_id} done"
