"""PostgreSQL backend that starts the embedded server on first connection.

Keeps settings free of side effects (mypy, `check` and imports never start a
server); the first real connection does.
"""

from pathlib import Path
from typing import Any

from django.db.backends.postgresql import base, client

from config import embedded


def _ensure(settings_dict: dict[str, Any]) -> None:
    settings_dict["HOST"] = embedded.ensure_running(
        Path(settings_dict["EMBEDDED_DATADIR"]),
        cleanup_mode=settings_dict.get("EMBEDDED_CLEANUP"),
    )


class DatabaseClient(client.DatabaseClient):
    def runshell(self, parameters: list[str]) -> None:
        _ensure(self.connection.settings_dict)
        super().runshell(parameters)


class DatabaseWrapper(base.DatabaseWrapper):
    client_class = DatabaseClient

    def get_connection_params(self) -> dict[str, Any]:
        _ensure(self.settings_dict)
        return super().get_connection_params()
