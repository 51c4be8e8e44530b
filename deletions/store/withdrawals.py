"""Authority withdrawals (the outbox to the target system) and their acknowledgements."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple
from uuid import UUID

from django.db import connection

from core.sql import Statements

SQL = Statements.beside(__file__, "withdrawals.sql")


class Pending(NamedTuple):
    request_id: UUID
    target: str
    epoch: int


def withdraw(request_id: UUID, *, cause: str, now: datetime) -> int:
    """Record a withdrawal in the caller's transaction (the request is locked); its epoch."""
    with connection.cursor() as cur:
        row = SQL.one(cur, "withdraw", request_id=request_id, cause=cause, now=now)
    assert row is not None
    return int(row[0])


def pending(*, request_id: UUID | None = None, limit: int = 100) -> list[Pending]:
    with connection.cursor() as cur:
        cur.execute(SQL.sql("pending"), {"request_id": request_id, "limit": limit})
        return [Pending(*r) for r in cur.fetchall()]


def acknowledged(p: Pending, *, epoch: int, where: str, now: datetime) -> None:
    with connection.cursor() as cur:
        SQL.run(cur, "acknowledged", request_id=p.request_id, epoch=epoch, where=where, now=now)


def push_failed(p: Pending, *, error: str, now: datetime) -> None:
    with connection.cursor() as cur:
        SQL.run(cur, "push_failed", request_id=p.request_id, epoch=p.epoch, error=error[:2000], now=now)
