from typing import Any

from django.core.management.base import CommandParser

from core.authority import Actor
from core.commands import DecisionCommand
from core.errors import BadInput
from retirements import selectors
from retirements.services import workspace_protect


class Command(DecisionCommand):
    help = (
        "Set or lift a workspace's legal hold or protection (WORKSPACE is its slug; a reason is required). "
        "A retirement closes without purge at its point of no return while either stands."
    )

    def add_options(self, parser: CommandParser) -> None:
        hold = parser.add_mutually_exclusive_group()
        hold.add_argument("--legal-hold", action="store_true", help="set the legal hold")
        hold.add_argument("--lift-legal-hold", action="store_true", help="lift the legal hold")
        parser.add_argument("--protected-reason", default=None, help="protect it with this reason ('' lifts it)")

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        if not (options["legal_hold"] or options["lift_legal_hold"]) and options["protected_reason"] is None:
            raise BadInput("say what changes: --legal-hold, --lift-legal-hold or --protected-reason")
        legal_hold = True if options["legal_hold"] else (False if options["lift_legal_hold"] else None)
        changed = workspace_protect(
            actor=actor, slug=request_id, legal_hold=legal_hold, protected_reason=options["protected_reason"], **extra
        )
        after = selectors.workspace(request_id)
        return {
            "slug": after.slug,
            "legal_hold": after.legal_hold,
            "protected_reason": after.protected_reason,
            "changed": changed,
        }
