from typing import Any

from django.core.management.base import CommandParser
from django.db import transaction

from core.authority import Actor
from core.commands import NO_REASON, DecisionCommand
from deletions import proposal
from deletions.selectors import get_request
from deletions.services import deletion_approve


class Command(DecisionCommand):
    help = "Approve the exact inventory of a submitted request (an approver, not its submitter; digest must match)."
    actor_flag = "--approved-by"
    reason = NO_REASON

    def add_options(self, parser: CommandParser) -> None:
        parser.add_argument("--inventory-digest", required=True)
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="show what would be approved and check every rule, then write nothing",
        )

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        if options["dry_run"]:
            return self.dry_run(actor, request_id, options["inventory_digest"])
        approval = deletion_approve(actor=actor, request_id=request_id, digest=options["inventory_digest"])
        return {
            "request_id": str(approval.request_id),
            "status": "approved",
            "approved_by": approval.approved_by,
            "approved_at": approval.approved_at.isoformat(),
            "inventory_digest": approval.inventory_digest,
            "expires_at": approval.expires_at.isoformat() if approval.expires_at else None,
        }

    def dry_run(self, actor: Actor, request_id: str, digest: str) -> dict[str, Any]:
        """The real approval, every check included, inside a transaction that is rolled back.
        A refusal is the one line it would be; nothing is written either way."""
        what = proposal.of_request(get_request(request_id))
        with transaction.atomic():
            deletion_approve(actor=actor, request_id=request_id, digest=digest)
            transaction.set_rollback(True)
        return {
            "request_id": request_id,
            "dry_run": True,
            "would_approve": True,
            "approved_by": actor.name,
            "what_will_be_deleted": proposal.lines(what),
            "proposal": what.as_json(),
        }
