from typing import Any

from core.authority import Actor
from core.commands import DecisionCommand
from retirements import selectors
from retirements.services import retirement_hold


class Command(DecisionCommand):
    help = "Hold a retirement in its waiting period (a reason is required)."

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        request = retirement_hold(actor=actor, request_id=selectors.get(request_id).id, **extra)
        return selectors.summary(request.id, "id", "status", "hold", "eligible_at")
