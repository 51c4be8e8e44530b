from typing import Any

from django.core.management.base import CommandParser
from django.db import IntegrityError

from core import clock
from core.commands import ServiceCommand
from core.errors import Refused, shown
from retirements.models import Lifecycle, Workspace
from retirements.services import valid_slug, workspace_name


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
        slug = valid_slug(options["slug"])
        name = workspace_name(options["name"])
        now = clock.now()
        try:
            ws = Workspace.objects.create(
                slug=slug,
                name=name,
                lifecycle=Lifecycle.DISABLED if options["disabled"] else Lifecycle.ACTIVE,
                activated_at=None if options["never_activated"] else now,
                is_disposable_test=options["disposable_test"],
                legal_hold=options["legal_hold"],
                created_at=now,
            )
        except IntegrityError:
            raise Refused(f"a workspace with slug {shown(slug)} exists") from None
        self.print_json({"slug": ws.slug, "name": ws.name, "lifecycle": ws.lifecycle})
