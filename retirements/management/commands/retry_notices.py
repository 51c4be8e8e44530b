from typing import Any

from core.authority import Actor
from core.commands import DecisionCommand
from retirements import selectors
from retirements.services import retirement_retry_notices


class Command(DecisionCommand):
    help = "Give a retirement's failed notices a fresh attempt budget (a reason is required)."

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        request = retirement_retry_notices(actor=actor, request_id=selectors.get(request_id).id, **extra)
        return selectors.summary(request.id, "id", "status", "next_wake_at", "notices")
