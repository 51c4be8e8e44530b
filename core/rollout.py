"""Seed 000's rollout rule: code never runs against a schema newer than itself.

A release migrates forward only. If the database has applied a migration this code does not have on
disk (a newer release migrated it, and this older code was started again, a rollback), the web server
and the workers refuse to start with one line that says to roll forward. Only the apps this code
installs are compared (a database shared with another system records that system's migrations too).
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.migrations.loader import MigrationLoader


class NewerSchema(Exception):
    """The database was migrated by code newer than this."""


def unknown_migrations(loader: Any) -> list[str]:
    """The applied migrations of this code's apps that this code does not know, as app.name (`loader`:
    a Django `MigrationLoader` over the database)."""
    ours = {app for app, _ in loader.disk_migrations} | set(loader.migrated_apps)
    applied = loader.applied_migrations or {}
    return sorted(f"{app}.{name}" for app, name in applied if app in ours and (app, name) not in loader.disk_migrations)


def require_known_schema(using: str = "default") -> None:
    """Nothing when this code knows every migration the database `using` has applied; else NewerSchema."""
    unknown = unknown_migrations(MigrationLoader(connections[using], ignore_no_migrations=True))
    if unknown:
        shown = ", ".join(unknown[:3]) + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else "")
        raise NewerSchema(
            f"refused to start: the database has migrations this code does not know ({shown}); it was "
            "migrated by a newer release: roll forward to that release, never run older code against it"
        )
