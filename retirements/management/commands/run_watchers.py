from typing import Any

from core import clock
from core.commands import ServiceCommand
from retirements.watcher import run_due


class Command(ServiceCommand):
    help = "Run every due watcher step and every queued purge job now, once; report stalled watchers."

    def handle(self, *args: Any, **options: Any) -> None:
        self.print_json(run_due(now=clock.now()))
