from typing import Any

from core.authority import Actor
from core.commands import DecisionCommand
from retirements.services import retirement_retry_notices
from retirements.store import reads


class Command(DecisionCommand):
    help = "Give a retirement's failed notices a fresh attempt budget (a reason is required)."

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        request = retirement_retry_notices(actor=actor, request_id=reads.get(request_id).id, **extra)
        return reads.summary(request.id, "id", "status", "next_wake_at", "notices")
