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


def due_requests(now: datetime, limit: int = BATCH) -> list[tuple[UUID, str]]:
    """The due requests, oldest first: (id, target)."""
    free = Q(lease_owner__isnull=True) | Q(lease_expires_at__lte=now)
    due = (
        Q(status=Status.APPROVED, cancel_requested_at__isnull=True)
        | Q(status=Status.RETRY_WAIT, next_attempt_at__lte=now)
        | Q(status=Status.RUNNING)
    )
    return list(DeletionRequest.objects.filter(due & free).order_by("updated_at").values_list("id", "target")[:limit])


def due_request_ids(now: datetime, limit: int = BATCH) -> list[UUID]:
    return [request_id for request_id, _ in due_requests(now, limit)]


def dispatch(now: datetime) -> list[UUID]:
    due = due_requests(now)
    for request_id, target in due:
        enqueue_run(request_id, target)
    return [request_id for request_id, _ in due]
