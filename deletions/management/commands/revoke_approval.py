from typing import Any

from django.core.management.base import CommandParser

from core.authority import Actor
from core.commands import DecisionCommand
from deletions.services import deletion_revoke_approval


class Command(DecisionCommand):
    help = "Revoke a request's current approval: nothing more is applied under it until a new approval."

    def add_options(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--requester-withdrew",
            action="store_true",
            help="the requester withdrew the request: the case then advises cancelling it, not approving again",
        )

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        req = deletion_revoke_approval(
            actor=actor, request_id=request_id, reason=extra["reason"], withdrawn=options["requester_withdrew"]
        )
        return {"id": str(req.id), "status": req.status, "open_question": req.open_question}
