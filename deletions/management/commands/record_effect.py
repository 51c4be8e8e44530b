from typing import Any

from django.core.management.base import CommandParser

from core.authority import Actor
from core.commands import NO_REASON, DecisionCommand
from deletions.services import deletion_record_effect


class Command(DecisionCommand):
    help = (
        "Record what you did by hand for the effect a manual: target handed you: --applied with the "
        "evidence you saw (purge_db: --has-agents yes|no), or --not-applied; the request resumes."
    )
    reason = NO_REASON

    def add_options(self, parser: CommandParser) -> None:
        outcome = parser.add_mutually_exclusive_group(required=True)
        outcome.add_argument("--applied", action="store_true", help="you applied it in the vendor's console")
        outcome.add_argument("--not-applied", action="store_true", help="you did not (or could not) apply it")
        parser.add_argument("--evidence", required=True, help="what you did or saw there (ticket, counts, screen)")
        parser.add_argument("--has-agents", choices=["yes", "no"], help="purge_db: whether agents are left")

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        agents = options["has_agents"]
        req = deletion_record_effect(
            actor=actor,
            request_id=request_id,
            applied=options["applied"],
            evidence=options["evidence"],
            has_agents=None if agents is None else agents == "yes",
        )
        return {"id": str(req.id), "status": req.status, "next_attempt_at": req.next_attempt_at}
