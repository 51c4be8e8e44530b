import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core import clock
from ops.health import report


class Command(BaseCommand):
    help = (
        "The system's health (database, clusters, workers, watchers, notices, receivers; exit 1 if red) and "
        "the work people have waiting (never red)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        data = report(clock.now())
        if options["json"]:
            self.stdout.write(json.dumps(data, indent=2))
        else:
            self.stdout.write(f"health: {data['status'].upper()}")
            for name, check in data["checks"].items():
                detail = check.get("detail", f"count {check.get('count')}")
                fix = f"; to fix: {data['remedies'][name]}" if name in data["remedies"] else ""
                self.stdout.write(f"  {'ok  ' if check['ok'] else 'FAIL'} {name}: {detail}{fix}")
            self.stdout.write("work waiting for people (not a fault of the system):")
            for name, waiting in data["work"].items():
                self.stdout.write(f"  {name}: {waiting['detail']}")
        if data["status"] != "green":
            raise CommandError("health is red", returncode=1)
