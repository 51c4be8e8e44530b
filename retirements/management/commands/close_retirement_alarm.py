from typing import Any

from django.core.management.base import CommandParser

from core.authority import Actor
from core.commands import DecisionCommand
from retirements import selectors
from retirements.contract import CLOSED_BY_A_PERSON
from retirements.services import retirement_close_alarm


class Command(DecisionCommand):
    help = (
        "Close a retirement's alarm that no state move answers (purge_stale_executor: a late purge executor "
        "rejected at the boundary) with what you found: a decision on the case, which the alarm names. An "
        "alarm a move answers is refused, naming that move."
    )

    def add_options(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--kind", default="", help=f"which, when more than one is open ({', '.join(CLOSED_BY_A_PERSON)})"
        )

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        alarm = retirement_close_alarm(
            actor=actor, request_id=selectors.get(request_id).id, kind=options["kind"], reason=extra["reason"]
        )
        decision = alarm.decision
        return {
            "id": str(alarm.request_id),
            "status": alarm.request.status,
            "closed": alarm.kind,
            "resolved_at": alarm.resolved_at.isoformat() if alarm.resolved_at else None,
            "by": decision.actor_label if decision else None,
            "decision": decision.id if decision else None,
        }
