"""Seed 000's rollout rule (`wire.rollout`) for the back-office's database: the web server and the
workers refuse to start against a schema newer than their code."""

from __future__ import annotations

from django.db import connections
from django.db.migrations.loader import MigrationLoader

from wire import rollout

NewerSchema = rollout.NewerSchema


def require_known_schema(using: str = "default") -> None:
    """Nothing when this code knows every migration the database `using` has applied; else NewerSchema."""
    rollout.require_known_schema(MigrationLoader(connections[using], ignore_no_migrations=True))
