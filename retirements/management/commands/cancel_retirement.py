from typing import Any

from core.authority import Actor
from core.commands import DecisionCommand
from retirements import selectors
from retirements.services import retirement_cancel


class Command(DecisionCommand):
    help = "Cancel a retirement before the point of no return; the workspace returns to disabled."

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        request = retirement_cancel(actor=actor, request_id=selectors.get(request_id).id, **extra)
        return selectors.summary(request.id, "id", "status", "workspace", "conclusion")
