from typing import Any

from django.core.management.base import CommandParser

from core.commands import ServiceCommand
from retirements.inspect import describe, get
from retirements.services import retirement_hold, user_named


class Command(ServiceCommand):
    help = "Hold a retirement in its waiting period (a reason is required)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("request_id")
        parser.add_argument("--by", required=True, metavar="USER")
        parser.add_argument("--reason", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        request = get(options["request_id"])
        retirement_hold(actor=user_named(options["by"]), request_id=request.id, reason=options["reason"])
        data = describe(get(request.id))
        self.print_json({k: data[k] for k in ("id", "status", "hold", "eligible_at")})
