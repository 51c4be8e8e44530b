"""The deletion decision log: every operator decision with actor, reason and time."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from core import decisions
from core.authority import Actor
from deletions.models import DeletionApproval, DeletionDecision


def record(
    *,
    request_id: UUID,
    actor: Actor | None,
    action: str,
    reason: str,
    now: datetime,
    approval: DeletionApproval | None = None,
    approval_id: UUID | None = None,
    generation: int | None = None,
    system: str = "worker",
) -> DeletionDecision:
    """`approval` / `generation`: the approval and lease generation the decision acted under."""
    return decisions.record(
        DeletionDecision,
        actor=actor,
        action=action,
        reason=reason,
        now=now,
        system=system,
        generation=generation,
        request_id=request_id,
        approval_id=approval.id if approval is not None else approval_id,
    )
