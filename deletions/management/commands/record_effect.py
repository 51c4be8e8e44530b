from typing import Any

from django.core.management.base import CommandParser

from core.authority import Actor
from core.commands import NO_REASON, DecisionCommand
from deletions.management.commands._effect import add_outcome, outcome
from deletions.services import deletion_record_effect


class Command(DecisionCommand):
    help = (
        "Record what you did by hand for the effect a manual: target handed you: --applied with the "
        "evidence you saw (purge_db: --has-agents yes|no), or --not-applied; the request resumes."
    )
    reason = NO_REASON

    def add_options(self, parser: CommandParser) -> None:
        add_outcome(
            parser,
            applied="you applied it in the vendor's console",
            not_applied="you did not (or could not) apply it",
            evidence="what you did or saw there (ticket, counts, screen)",
        )

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        req = deletion_record_effect(actor=actor, request_id=request_id, **outcome(options))
        return {"id": str(req.id), "status": req.status, "next_attempt_at": req.next_attempt_at}
