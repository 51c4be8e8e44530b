"""The deletion decision log: every operator decision with actor, reason and time."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from core import decisions
from core.authority import Actor
from deletions.models import DeletionDecision


def record(*, request_id: UUID, actor: Actor | None, action: str, reason: str, now: datetime) -> DeletionDecision:
    return decisions.record(
        DeletionDecision, actor=actor, action=action, reason=reason, now=now, system="worker", request_id=request_id
    )
