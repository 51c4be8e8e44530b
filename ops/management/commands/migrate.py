"""`manage.py migrate` migrates the case database as its migration role (the back-office has no other:
the demo application's is served by the dataset receiver, `python -m receiver install`).

The application connects as `DATABASE_APP_ROLE`, which owns nothing and so can neither create nor
alter a table; migrations connect with the credentials under the database's `MIGRATION` key (the
tables' owner; config/settings.py), on the same server and database.
"""

from typing import Any

from django.core.management.commands import migrate
from django.db import connections


class Command(migrate.Command):
    help = "Updates the database's schema, connected as the migration role (the tables' owner)."

    def execute(self, *args: Any, **options: Any) -> Any:
        connection = connections[options.get("database") or "default"]
        owner = connection.settings_dict.get("MIGRATION")
        if owner:  # before the system checks connect
            connection.close()
            connection.settings_dict.update(owner)
        return super().execute(*args, **options)
