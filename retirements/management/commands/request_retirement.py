from typing import Any

from django.core.management.base import CommandParser

from core.commands import ServiceCommand, acting, add_token_argument
from retirements import selectors
from retirements.services import retirement_request


class Command(ServiceCommand):
    help = "Request retirement of a disabled workspace; prints the request as JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", required=True, metavar="SLUG")
        parser.add_argument("--requested-by", required=True, metavar="USER")
        add_token_argument(parser)
        parser.add_argument("--reason", required=True)
        parser.add_argument("--confirm", required=True, metavar="SLUG", help="type the workspace slug again")

    def handle(self, *args: Any, **options: Any) -> None:
        request = retirement_request(
            actor=acting(options, "--requested-by"),
            slug=options["workspace"],
            reason=options["reason"],
            confirmation=options["confirm"],
        )
        self.print_json(selectors.summary(request.id, "id", "status", "eligible_at", "eligibility_policy", "notices"))
