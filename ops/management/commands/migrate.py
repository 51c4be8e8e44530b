"""`manage.py migrate` migrates both databases: the case database, then the demo target system's.

Django's own command migrates one database; run from the command line without `--database`,
this one leaves neither behind. Called from code (the test setup migrates each database itself)
or with `--database`, it is Django's.
"""

from typing import Any

from django.core.management.commands import migrate


class Command(migrate.Command):
    both = False

    def run_from_argv(self, argv: list[str]) -> None:
        self.both = not any(a == "--database" or a.startswith("--database=") for a in argv)
        super().run_from_argv(argv)

    def handle(self, *args: Any, **options: Any) -> None:
        super().handle(*args, **options)
        if self.both and not options.get("app_label"):
            super().handle(*args, **{**options, "database": "target"})
