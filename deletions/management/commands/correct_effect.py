from typing import Any

from django.core.management.base import CommandParser

from core.authority import Actor
from core.commands import DecisionCommand
from deletions.management.commands._effect import add_outcome, outcome
from deletions.services import deletion_correct_effect


class Command(DecisionCommand):
    help = (
        "Correct the latest record of an effect applied by hand (an approver who did not make it): a new record "
        "linked to it, both kept; the case does not move."
    )

    def add_options(self, parser: CommandParser) -> None:
        add_outcome(
            parser,
            applied="it was in fact applied",
            not_applied="it was in fact not applied",
            evidence="what was in fact done, and how you know",
        )

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        req = deletion_correct_effect(actor=actor, request_id=request_id, reason=extra["reason"], **outcome(options))
        return {"id": str(req.id), "status": req.status}
