from typing import Any

from django.core.management.base import CommandParser

from core.authority import Actor
from core.commands import REASON_OPTIONAL, DecisionCommand
from deletions.services import deletion_resume


class Command(DecisionCommand):
    help = "Resume a request that needs attention (after 10 consecutive failures); its retry is due at once."
    reason = REASON_OPTIONAL

    def add_options(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--effect-not-applied",
            action="store_true",
            help="you checked the target system: the current stage's operation was never applied; allow a resend",
        )

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        req = deletion_resume(
            actor=actor,
            request_id=request_id,
            reason=extra["reason"],
            effect_not_applied=options["effect_not_applied"],
        )
        return {"id": str(req.id), "status": req.status, "next_attempt_at": req.next_attempt_at}
