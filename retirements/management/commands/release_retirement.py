from typing import Any

from django.core.management.base import CommandParser

from core.commands import ServiceCommand
from retirements.inspect import describe, get
from retirements.services import retirement_release, user_named


class Command(ServiceCommand):
    help = "Release a hold: eligibility moves by the time on hold and notices are re-planned."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("request_id")
        parser.add_argument("--by", required=True, metavar="USER")
        parser.add_argument("--reason", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        request = get(options["request_id"])
        retirement_release(actor=user_named(options["by"]), request_id=request.id, reason=options["reason"])
        data = describe(get(request.id))
        self.print_json({k: data[k] for k in ("id", "status", "eligible_at", "next_wake_at", "notices")})
