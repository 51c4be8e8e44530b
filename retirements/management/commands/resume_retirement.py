from typing import Any

from django.core.management.base import CommandParser

from core.commands import ServiceCommand
from retirements.inspect import describe, get
from retirements.services import retirement_resume, user_named


class Command(ServiceCommand):
    help = "Replace a stalled watcher (refused while the current one still runs)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("request_id")
        parser.add_argument("--by", required=True, metavar="USER")

    def handle(self, *args: Any, **options: Any) -> None:
        request = get(options["request_id"])
        retirement_resume(actor=user_named(options["by"]), request_id=request.id)
        data = describe(get(request.id))
        self.print_json({k: data[k] for k in ("id", "status", "next_wake_at", "watchers")})
