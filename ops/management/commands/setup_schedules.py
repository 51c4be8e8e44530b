from typing import Any

from django.core.management.base import BaseCommand

from ops.schedules import ensure_schedules, missing


class Command(BaseCommand):
    help = "Register the periodic django-q2 schedules (safe to run again)."

    def handle(self, *args: Any, **options: Any) -> None:
        for name in missing():
            self.stderr.write(f"warning: schedule {name!r} was missing; recreating it")
        for schedule in ensure_schedules():
            if options["verbosity"] > 0:
                self.stdout.write(f"schedule {schedule.name!r}: {schedule.func} every {schedule.minutes} minute(s)")
