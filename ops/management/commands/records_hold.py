from typing import Any

from django.core.management.base import CommandParser

from core.commands import ServiceCommand, acting, add_token_argument
from ops import retention


class Command(ServiceCommand):
    help = "Place (or --release) a records hold on a case: its records stay whatever their retention period."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("case_id")
        parser.add_argument("--kind", required=True, choices=retention.CASE_KINDS)
        parser.add_argument("--by", required=True, metavar="USER")
        add_token_argument(parser)
        parser.add_argument("--reason", required=True)
        parser.add_argument("--release", action="store_true", help="release the hold instead")

    def handle(self, *args: Any, **options: Any) -> None:
        decide = retention.release_hold if options["release"] else retention.place_hold
        hold = decide(
            actor=acting(options, "--by"),
            kind=options["kind"],
            case_id=options["case_id"],
            reason=options["reason"],
        )
        self.print_json(
            {"case": str(hold.case_id), "kind": hold.case_kind, "held": hold.released_at is None, "reason": hold.reason}
        )
