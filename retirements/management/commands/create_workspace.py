from typing import Any

from django.core.management.base import CommandParser

from core.commands import ServiceCommand
from retirements.services import workspace_create


class Command(ServiceCommand):
    help = "Create a workspace (demo data and scripts)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--slug", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument("--disabled", action="store_true", help="create it disabled (retirable)")
        parser.add_argument("--never-activated", action="store_true")
        parser.add_argument("--disposable-test", action="store_true")
        parser.add_argument("--legal-hold", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        ws = workspace_create(
            slug=options["slug"],
            name=options["name"],
            disabled=options["disabled"],
            never_activated=options["never_activated"],
            disposable=options["disposable_test"],
            legal_hold=options["legal_hold"],
        )
        self.print_json({"slug": ws.slug, "name": ws.name, "lifecycle": ws.lifecycle})
