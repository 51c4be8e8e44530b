"""The retention job's writes on closed retirement cases (named statements in `retention.sql`);
`ops.retention` decides which case and when."""

from __future__ import annotations

from uuid import UUID

from django.db import connection

from core.sql import Statements

SQL = Statements.beside(__file__, "retention.sql")


def erase_case(request_id: UUID) -> dict[str, int]:
    with connection.cursor() as cur:
        row = SQL.one(cur, "erase_case", request_id=request_id) or (0, 0, 0, 0)
    return dict(zip(("requests", "notices", "decisions", "other"), row, strict=True))
