from typing import Any

from django.core.management.base import CommandParser

from core.commands import ServiceCommand, acting, add_token_argument, parse_time
from deletions.rules.inventory import DEMO_COMMUNITIES, MAX_DEMO_COMMUNITIES
from deletions.services import deletion_submit, submission_json


class Command(ServiceCommand):
    help = "Submit a demo user-deletion request; prints it as JSON (id, status, inventory, inventory_digest)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--target", required=True, help="demo:NAME")
        parser.add_argument("--requested-by", required=True, help="operator submitting the request")
        add_token_argument(parser)
        parser.add_argument("--reason", default="", help="ticket or why (kept in the decision log)")
        parser.add_argument(
            "--received-at",
            metavar="ISO",
            help="when the request was received (intake; default now): its legal deadline runs from then",
        )
        parser.add_argument(
            "--demo-communities",
            type=int,
            default=DEMO_COMMUNITIES,
            metavar="N",
            help=f"communities in the demo inventory: B and C, then N-2 more (default {DEMO_COMMUNITIES}, at most "
            f"{MAX_DEMO_COMMUNITIES:,}, then their own records); for benchmarks and tests of large requests",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        actor = acting(options, "--requested-by")
        req = deletion_submit(
            actor=actor,
            target=options["target"],
            reason=options["reason"],
            communities=options["demo_communities"],
            received_at=parse_time(options["received_at"], "--received-at") if options["received_at"] else None,
        )
        self.print_json(submission_json(req))
