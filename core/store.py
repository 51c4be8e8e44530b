"""Store plumbing both workflows share: parse an id, lock a row or say it does not exist."""

from __future__ import annotations

import re
from typing import Any, TypeVar
from uuid import UUID

from django.db import connection, connections, models

from core.errors import BadInput, NotFound, shown

M = TypeVar("M", bound=models.Model)


def parse_id(raw: Any, noun: str = "request") -> UUID:
    try:
        return raw if isinstance(raw, UUID) else UUID(str(raw))
    except ValueError:
        raise BadInput(f"{noun} id {shown(raw)} is not a UUID") from None


def get_or_not_found(queryset: models.QuerySet[M], pk: Any, noun: str) -> M:
    row = next(iter(queryset.filter(pk=pk)[:1]), None)  # by key: no ORDER BY to compile or run
    if row is None:
        raise NotFound(f"no {noun} with id {pk}")
    return row


def lock_or_not_found(queryset: models.QuerySet[M], pk: Any, noun: str) -> M:
    """Lock the row (call inside atomic()) or refuse with NotFound."""
    return get_or_not_found(queryset.select_for_update(), pk, noun)


COUNT_CAP = 10_000


def capped_counts(
    model: type[models.Model], column: str, values: list[str], *, index_order: tuple[str, ...], cap: int = COUNT_CAP
) -> dict[str, int]:
    """How many rows have each value of an indexed column, counting at most `cap` + 1 of each:
    one statement of bounded index ranges, however big the table grows (shown as "10,000+").
    The values are the code's own choices, written into the statement so each range is
    planned for its value (a parameter would get one plan for all, a scan for a rare one);
    `index_order` is the rest of an index that starts with `column` ("-created_at", "-id"),
    so even the commonest value is read through that index, at most `cap` + 1 entries."""
    if not all(re.fullmatch(r"[a-z_]{1,64}", v) for v in values):
        raise ValueError(f"capped_counts takes code values only, not {values!r}")
    table = connection.ops.quote_name(model._meta.db_table)
    col = connection.ops.quote_name(column)
    order = ", ".join(
        [col, *(connection.ops.quote_name(f.lstrip("-")) + (" DESC" if f.startswith("-") else "") for f in index_order)]
    )
    parts = [
        f"SELECT '{v}', (SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {col} = '{v}' ORDER BY {order}"
        f" LIMIT {int(cap) + 1}) c)"
        for v in values
    ]
    with connection.cursor() as cur:
        cur.execute(" UNION ALL ".join(parts))
        return dict(cur.fetchall())


def shown_count(n: int, cap: int = COUNT_CAP) -> str:
    return f"{cap:,}+" if n > cap else f"{n:,}"


def connection_url(alias: str = "default") -> str:
    """A database this process is connected to, as a URL a child `manage.py` can be given."""
    conn = connections[alias]
    conn.ensure_connection()
    s = conn.settings_dict
    host = s["HOST"] or ""
    if host.startswith("/"):
        return f"postgresql://{s['USER']}@/{s['NAME']}?host={host}"
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return f"postgresql://{auth}@{host}:{s.get('PORT') or 5432}/{s['NAME']}"
