"""The retention job's writes on closed deletion cases (named statements in `retention.sql`);
`ops.retention` decides which case and when, and runs each in its own transaction with the
retention setting on (`core.lifecycle.retention_on`)."""

from __future__ import annotations

from uuid import UUID

from django.db import connection

from core.sql import Statements

SQL = Statements.beside(__file__, "retention.sql")


def erase_case(request_id: UUID) -> dict[str, int]:
    """Delete every row of a closed case; the counts of what went, by kind."""
    with connection.cursor() as cur:
        row = SQL.one(cur, "erase_case", request_id=request_id) or (0, 0, 0, 0, 0, 0)
    return dict(zip(("requests", "stages", "approvals", "decisions", "lease_history", "other"), row, strict=True))


def drop_lease_history(request_id: UUID) -> int:
    with connection.cursor() as cur:
        row = SQL.one(cur, "drop_lease_history", request_id=request_id)
    return int(row[0]) if row else 0


def drop_evidence(request_id: UUID) -> int:
    with connection.cursor() as cur:
        return SQL.run(cur, "drop_evidence", request_id=request_id)
