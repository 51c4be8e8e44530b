"""Structured log lines: one JSON object per line in production, readable in development.

Call `event(logger, "claim", request_id=..., executor=..., generation=...)`; the
fields travel as `extra` and the formatter decides how they look. Ids only,
never personal data.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

FIELDS = ("event", "request_id", "stage_id", "executor", "generation", "stage", "reason")


def event(logger: logging.Logger, name: str, level: int = logging.INFO, **fields: Any) -> None:
    fields = {k: (str(v) if v is not None and not isinstance(v, int) else v) for k, v in fields.items()}
    logger.log(level, name, extra={"event": name, **fields})


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "at": datetime.fromtimestamp(record.created, tz=UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in FIELDS:
            if hasattr(record, key):
                data[key] = getattr(record, key)
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


class ReadableFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        extras = " ".join(f"{k}={getattr(record, k)}" for k in FIELDS[1:] if getattr(record, k, None) is not None)
        return f"{base} {extras}" if extras else base
