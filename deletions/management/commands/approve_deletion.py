from typing import Any

from django.core.management.base import CommandParser

from core.commands import ServiceCommand
from deletions.users.service import deletion_approve


class Command(ServiceCommand):
    help = "Approve the exact inventory of a submitted request (a second operator; digest must match)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("request_id")
        parser.add_argument("--approved-by", required=True)
        parser.add_argument("--inventory-digest", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        approval = deletion_approve(
            request_id=options["request_id"], approved_by=options["approved_by"], digest=options["inventory_digest"]
        )
        self.print_json(
            {
                "request_id": str(approval.request_id),
                "status": "approved",
                "approved_by": approval.approved_by,
                "approved_at": approval.approved_at.isoformat(),
                "inventory_digest": approval.inventory_digest,
                "expires_at": approval.expires_at.isoformat() if approval.expires_at else None,
            }
        )
