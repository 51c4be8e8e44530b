from typing import Any

from django.core.management.base import CommandParser

from core.authority import Actor
from core.commands import DecisionCommand, parse_time
from core.errors import BadInput, shown
from deletions.rules.custody import add_months
from deletions.selectors import get_request
from deletions.services import deletion_extend_deadline

MONTHS_BOUND = 1200  # the service refuses anything past its own limit, with the reason


class Command(DecisionCommand):
    help = "Extend a deletion request's legal deadline, with a reason: at most three months after receipt."

    def add_options(self, parser: CommandParser) -> None:
        when = parser.add_mutually_exclusive_group(required=True)
        when.add_argument("--until", metavar="ISO", help="the new deadline")
        when.add_argument("--months", type=int, metavar="N", help="the new deadline: N months after receipt")

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        if options["months"] is not None:
            if not 1 <= options["months"] <= MONTHS_BOUND:  # bounded before any date arithmetic
                raise BadInput(f"--months {shown(str(options['months']))} is refused: give 1 to {MONTHS_BOUND}")
            until = add_months(get_request(request_id).received_at, options["months"])
        else:
            until = parse_time(options["until"], "--until")
        req = deletion_extend_deadline(actor=actor, request_id=request_id, until=until, reason=extra["reason"])
        return {"id": str(req.id), "received_at": req.received_at.isoformat(), "due_at": req.due_at.isoformat()}
