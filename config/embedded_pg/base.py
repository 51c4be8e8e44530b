"""PostgreSQL backend: starts the embedded server (when configured) on first connection.

Keeps settings free of side effects (mypy, `check` and imports never start a
server); the first real connection does.
"""

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.db.backends.postgresql import base, client

from config import embedded


def _ensure(settings_dict: dict[str, Any]) -> None:
    if "EMBEDDED_DATADIR" not in settings_dict:
        return  # DATABASE_URL: an external server
    settings_dict["HOST"] = embedded.ensure_running(
        Path(settings_dict["EMBEDDED_DATADIR"]),
        cleanup_mode=settings_dict.get("EMBEDDED_CLEANUP"),
    )


class DatabaseClient(client.DatabaseClient):
    """dbshell with the psql shipped in the wheel, so no system client is needed."""

    @classmethod
    def settings_to_cmd_args_env(cls, settings_dict: dict[str, Any], parameters: Iterable[str]) -> tuple[Any, Any]:
        args, env = super().settings_to_cmd_args_env(settings_dict, parameters)
        args[0] = str(embedded.bin_path() / "psql")
        return args, env

    def runshell(self, parameters: Iterable[str]) -> None:
        _ensure(self.connection.settings_dict)
        super().runshell(parameters)


class DatabaseWrapper(base.DatabaseWrapper):
    client_class = DatabaseClient

    def get_connection_params(self) -> dict[str, Any]:
        _ensure(self.settings_dict)
        return super().get_connection_params()
