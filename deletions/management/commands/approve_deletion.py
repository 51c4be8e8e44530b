from typing import Any

from django.core.management.base import CommandParser

from core.authority import Actor
from core.commands import NO_REASON, DecisionCommand
from deletions.services import deletion_approve


class Command(DecisionCommand):
    help = "Approve the exact inventory of a submitted request (a second operator; digest must match)."
    actor_flag = "--approved-by"
    reason = NO_REASON

    def add_options(self, parser: CommandParser) -> None:
        parser.add_argument("--inventory-digest", required=True)

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        approval = deletion_approve(actor=actor, request_id=request_id, digest=options["inventory_digest"])
        return {
            "request_id": str(approval.request_id),
            "status": "approved",
            "approved_by": approval.approved_by,
            "approved_at": approval.approved_at.isoformat(),
            "inventory_digest": approval.inventory_digest,
            "expires_at": approval.expires_at.isoformat() if approval.expires_at else None,
        }
