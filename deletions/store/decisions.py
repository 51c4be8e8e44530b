"""The decision log: every operator decision with actor, reason and time."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from deletions.models import DeletionDecision


def record(*, request_id: UUID, actor: str, action: str, reason: str, now: datetime) -> DeletionDecision:
    return DeletionDecision.objects.create(
        request_id=request_id, actor=actor, action=action, reason=reason, created_at=now
    )
