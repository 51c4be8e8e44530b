"""PostgreSQL backend: starts the embedded server (when configured) on first connection.

Keeps settings free of side effects (mypy, `check` and imports never start a
server); the first real connection does.
"""

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psycopg
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

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        """A database marked CREATE_IF_MISSING (the demo application's, beside the case database) is
        created on the same server the first time it is missing."""
        try:
            return super().get_new_connection(conn_params)
        except psycopg.OperationalError as exc:
            if not self.settings_dict.get("CREATE_IF_MISSING") or "does not exist" not in str(exc):
                raise
        with self._nodb_cursor() as cur:
            try:
                cur.execute(f"CREATE DATABASE {self.ops.quote_name(self.settings_dict['NAME'])}")
            except Exception as exc:  # another process created it first
                if "already exists" not in str(exc):
                    raise
        return super().get_new_connection(conn_params)
