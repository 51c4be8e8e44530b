from typing import Any

from django.core.management.base import CommandParser

from core.commands import ServiceCommand
from deletions.users.service import deletion_cancel


class Command(ServiceCommand):
    help = "Cancel a request: outright before it starts; at the next stage boundary once running."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("request_id")
        parser.add_argument("--by", required=True)
        parser.add_argument("--reason", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        req = deletion_cancel(request_id=options["request_id"], cancelled_by=options["by"], reason=options["reason"])
        self.print_json({"id": str(req.id), "status": req.status, "last_action": req.last_action})
