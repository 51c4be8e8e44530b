from typing import Any

from django.core.management.base import CommandParser

from core.authority import Actor
from core.commands import DecisionCommand
from deletions.contract import FAULT_ALARMS
from deletions.services import deletion_close_alarm


class Command(DecisionCommand):
    help = (
        "Close a fault of a deletion case (an integrity fault, or an effect applied by hand after its approval "
        "was withdrawn) with what you found: a decision on the case; it approves or completes nothing."
    )

    def add_options(self, parser: CommandParser) -> None:
        parser.add_argument("--kind", choices=FAULT_ALARMS, default="", help="which, when more than one is open")

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        req = deletion_close_alarm(actor=actor, request_id=request_id, kind=options["kind"], reason=extra["reason"])
        return {"id": str(req.id), "status": req.status, "closed": options["kind"] or "the open fault"}
