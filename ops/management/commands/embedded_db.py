from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from config import embedded


class Command(BaseCommand):
    help = "Manage the embedded PostgreSQL server (used when DATABASE_URL is not set)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["start", "stop", "status", "repair"])

    def handle(self, *args: Any, **options: Any) -> None:
        db: dict[str, Any] = dict(settings.DATABASES["default"])
        if "EMBEDDED_DATADIR" not in db:
            raise CommandError("DATABASE_URL is set: there is no embedded server to manage", returncode=2)
        datadir = Path(db["EMBEDDED_DATADIR"])
        action = options["action"]
        if action == "start":
            self.stdout.write(f"running; socket directory {embedded.ensure_running(datadir)}")
        elif action == "stop":
            self.stdout.write("stopped" if embedded.stop(datadir) else "not running")
        elif action == "repair":
            notes = embedded.repair(datadir) if datadir.exists() else []
            self.stdout.write("\n".join(notes) or "nothing to repair")
        else:
            if datadir.exists():
                embedded.repair(datadir)
            running = (datadir / "postmaster.pid").exists()
            self.stdout.write(f"{datadir}: {'running' if running else 'not running'}")
