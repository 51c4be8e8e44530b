from typing import Any

from core.authority import Actor
from core.commands import DecisionCommand
from deletions.services import deletion_cancel


class Command(DecisionCommand):
    help = "Cancel a request: outright before it starts; at the next stage boundary once running."

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        req = deletion_cancel(actor=actor, request_id=request_id, reason=extra["reason"])
        return {"id": str(req.id), "status": req.status, "last_action": req.last_action}
