"""`manage.py migrate` migrates both databases, each as its migration role: the case database,
then the demo target system's.

Django's own command migrates one database; run from the command line without `--database`,
this one leaves neither behind. Called from code (the test setup migrates each database itself)
or with `--database`, it migrates that one.

The application connects as `DATABASE_APP_ROLE`, which owns nothing and so can neither create nor
alter a table; migrations connect with the credentials under the database's `MIGRATION` key (the
tables' owner; config/settings.py), on the same server and database.
"""

from typing import Any

from django.core.management.commands import migrate
from django.db import connections


class Command(migrate.Command):
    help = "Updates both databases' schemas, connected as the migration role (the tables' owner)."
    both = False

    def run_from_argv(self, argv: list[str]) -> None:
        self.both = not any(a == "--database" or a.startswith("--database=") for a in argv)
        super().run_from_argv(argv)

    def execute(self, *args: Any, **options: Any) -> Any:
        connection = connections[options.get("database") or "default"]
        owner = connection.settings_dict.get("MIGRATION")
        if owner:  # before the system checks connect
            connection.close()
            connection.settings_dict.update(owner)
        return super().execute(*args, **options)

    def handle(self, *args: Any, **options: Any) -> None:
        super().handle(*args, **options)
        if self.both and not options.get("app_label"):
            super().handle(*args, **{**options, "database": "target"})
