from typing import Any

from django.core.management.base import CommandParser

from core.authority import Actor
from core.commands import DecisionCommand
from deletions.services import deletion_correct_effect


class Command(DecisionCommand):
    help = (
        "Correct the latest record of an effect applied by hand (an approver who did not make it): a new record "
        "linked to it, both kept; the case does not move."
    )

    def add_options(self, parser: CommandParser) -> None:
        outcome = parser.add_mutually_exclusive_group(required=True)
        outcome.add_argument("--applied", action="store_true", help="it was in fact applied")
        outcome.add_argument("--not-applied", action="store_true", help="it was in fact not applied")
        parser.add_argument("--evidence", required=True, help="what was in fact done, and how you know")
        parser.add_argument("--has-agents", choices=["yes", "no"], help="purge_db applied: whether agents are left")

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        agents = options["has_agents"]
        req = deletion_correct_effect(
            actor=actor,
            request_id=request_id,
            applied=options["applied"],
            evidence=options["evidence"],
            reason=extra["reason"],
            has_agents=None if agents is None else agents == "yes",
        )
        return {"id": str(req.id), "status": req.status}
