"""Structured log lines: one JSON object per line in production, readable in development.

Call `event(logger, "claim", request_id=..., executor=..., generation=...)`; the
fields travel as `extra` and the formatter decides how they look. Ids only,
never personal data.
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

FIELDS = ("event", "request_id", "stage_id", "executor", "generation", "stage", "reason")

# The HTTP request a log line belongs to (`request_id` is taken: it names a deletion request).
HTTP_REQUEST_ID: ContextVar[str] = ContextVar("http_request_id", default="")
_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def event(logger: logging.Logger, name: str, level: int = logging.INFO, **fields: Any) -> None:
    if not logger.isEnabledFor(level):
        return  # on the stage path: nothing formatted for a line nobody keeps
    fields = {k: (str(v) if v is not None and not isinstance(v, int) else v) for k, v in fields.items()}
    logger.log(level, name, extra={"event": name, **fields})


class JsonFormatter(_JsonFormatter):
    """One JSON object per line (python-json-logger): time, level, logger, message, the
    event's id fields, the HTTP request id, and a traceback when there is one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("timestamp", "at")
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger", "exc_info": "exc"})
        super().__init__("%(levelname)s %(name)s %(message)s", *args, **kwargs)


class HttpRequestIdFilter(logging.Filter):
    """Puts the current HTTP request's id on every record logged while it is served."""

    def filter(self, record: logging.LogRecord) -> bool:
        http_id = HTTP_REQUEST_ID.get()
        if http_id and not hasattr(record, "http_request_id"):
            record.http_request_id = http_id
        return True


class ExpectedFailureFilter(logging.Filter):
    """django-q2 logs a failed task with its whole traceback. A stage that failed and was saved
    for a retry (`deletions.tasks.StageFailed`) is expected: one line, its saved reason, no
    traceback (the case page and the failed-task list keep the rest). Other failures keep theirs."""

    MARK = "deletions.tasks.StageFailed"

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "Traceback (most recent call last)" in message and self.MARK in message:
            record.msg, record.args = message.split(" : Traceback", 1)[0], ()
        return True


class RequestIdMiddleware:
    """An id per HTTP request: the proxy's `X-Request-ID` when it is a plain token, else a new
    one; echoed in the response so a user's report can be matched to the log lines."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        given = request.headers.get("X-Request-ID", "")
        http_id = given if _SAFE_ID.match(given) else uuid.uuid4().hex
        token = HTTP_REQUEST_ID.set(http_id)
        try:
            response = self.get_response(request)
        finally:
            HTTP_REQUEST_ID.reset(token)
        response["X-Request-ID"] = http_id
        return response


class ReadableFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        names = (*FIELDS[1:], "http_request_id")
        extras = " ".join(f"{k}={getattr(record, k)}" for k in names if getattr(record, k, None) is not None)
        return f"{base} {extras}" if extras else base


def pseudonymous_client(username: str, ip_address: str, user_agent: str, path_info: str, request: Any) -> str:
    """How django-axes names a client in log lines: a stable digest, never the username or
    address themselves (superusers see those in the admin's Access attempts)."""
    digest = hashlib.sha256(f"{username}|{ip_address}".encode()).hexdigest()[:12]
    return f"client {digest}"
