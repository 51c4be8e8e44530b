from typing import Any

from django.core.management.base import CommandParser

from core.commands import ServiceCommand
from ops import retention


class Command(ServiceCommand):
    help = (
        "Apply the retention periods: a closed case past its period becomes a tombstone, older lease history, "
        "evidence copies and notifications go. Never an open case, a held one or one under investigation. "
        "Prints the run's counts as JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="count what would go; delete nothing")
        parser.add_argument(
            "--closed-case-days", type=int, metavar="N", help="this run only: closed cases older than N days"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        run = retention.run(dry_run=options["dry_run"], closed_case_days=options["closed_case_days"])
        self.print_json(
            {
                "run": run.pk,
                "dry_run": run.dry_run,
                "periods": run.periods,
                "counts": run.counts,
                "stopped_early": run.stopped_early,
            }
        )
