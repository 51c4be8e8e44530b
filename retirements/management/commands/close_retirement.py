from typing import Any

from core.authority import Actor
from core.commands import DecisionCommand
from retirements import selectors
from retirements.services import retirement_close_refused


class Command(DecisionCommand):
    help = "Close a request whose purge was refused, without purge; the workspace returns to disabled."

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        request = retirement_close_refused(actor=actor, request_id=selectors.get(request_id).id, **extra)
        return selectors.summary(request.id, "id", "status", "workspace", "conclusion")
