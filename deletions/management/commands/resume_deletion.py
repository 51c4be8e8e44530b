from typing import Any

from django.core.management.base import CommandParser

from core.commands import ServiceCommand
from deletions.users.service import deletion_resume


class Command(ServiceCommand):
    help = "Resume a request that needs attention (after 10 consecutive failures); its retry is due at once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("request_id")
        parser.add_argument("--by", required=True)
        parser.add_argument("--reason", default="")
        parser.add_argument(
            "--effect-not-applied",
            action="store_true",
            help="you checked the target system: the current stage's operation was never applied; allow a resend",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        req = deletion_resume(
            request_id=options["request_id"],
            resumed_by=options["by"],
            reason=options["reason"],
            effect_not_applied=options["effect_not_applied"],
        )
        self.print_json({"id": str(req.id), "status": req.status, "next_attempt_at": req.next_attempt_at})
