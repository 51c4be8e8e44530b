"""The periodic dispatcher: nothing depends on one enqueue succeeding.

It enqueues a run for every approved request, every retry whose deadline
passed and every running request whose lease expired. Duplicate enqueues are
harmless: the lease refuses the second worker.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.db.models import Q

from deletions.jobs import enqueue_run
from deletions.models import DeletionRequest, Status

BATCH = 500


def due_request_ids(now: datetime, limit: int = BATCH) -> list[UUID]:
    free = Q(lease_owner__isnull=True) | Q(lease_expires_at__lte=now)
    due = (
        Q(status=Status.APPROVED, cancel_requested_at__isnull=True)
        | Q(status=Status.RETRY_WAIT, next_attempt_at__lte=now)
        | Q(status=Status.RUNNING)
    )
    return list(DeletionRequest.objects.filter(due & free).order_by("updated_at").values_list("id", flat=True)[:limit])


def dispatch(now: datetime) -> list[UUID]:
    ids = due_request_ids(now)
    for request_id in ids:
        enqueue_run(request_id)
    return ids
