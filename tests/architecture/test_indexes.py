"""Every index of the project's tables earns its writes: none is a leading part of another, nor
its twin, in the case database or the demo application's (samples/demo/schema.sql).

Each row written to a table is written to every one of its indexes, and an update that changes an
indexed column writes them all again. An index whose columns (with their operator classes) lead
another full index (Django's automatic one on a foreign key, say, beside a unique constraint that
starts with that key) serves no read the other does not, and costs a write on every insert.
"""

from __future__ import annotations

import pytest
from django.db import connections

pytestmark = pytest.mark.django_db

OUR_TABLES = {
    "default": ["entity_deletion_%", "retirements_%", "api_%", "ops_%", "core_%"],
    "target": ["people", "communities", "memberships", "posts", "agents"],
}


def _indexes(alias: str) -> list[tuple[str, str, list[str], bool, bool]]:
    """(table, index, its key columns in order, each with its operator class, partial or covering
    (an INCLUDE makes an index-only scan of its own), unique) of every btree index on the
    project's tables in one database."""
    with connections[alias].cursor() as cur:
        cur.execute(
            """SELECT t.relname, i.relname,
                      array(SELECT pg_get_indexdef(x.indexrelid, k + 1, true) || ' ' || c.opcname
                            FROM generate_subscripts(x.indkey, 1) k JOIN pg_opclass c ON c.oid = x.indclass[k]
                            WHERE k < x.indnkeyatts ORDER BY k),
                      x.indpred IS NOT NULL OR x.indnatts > x.indnkeyatts, x.indisunique
               FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
               JOIN pg_am am ON am.oid = i.relam
               WHERE am.amname = 'btree' AND t.relname LIKE ANY(%s) AND t.relnamespace = 'public'::regnamespace""",
            [OUR_TABLES[alias]],
        )
        return [(table, index, list(keys), partial, unique) for table, index, keys, partial, unique in cur.fetchall()]


@pytest.mark.parametrize("alias", list(OUR_TABLES))
def test_no_index_leads_another_or_repeats_it(alias: str) -> None:
    found = _indexes(alias)
    assert len({table for table, *_ in found}) >= 5  # the catalog read finds the database's tables
    redundant = [
        f"{table}.{index} ({', '.join(keys)}) is led by or repeats {other} ({', '.join(other_keys)})"
        for table, index, keys, partial, unique in found
        if not partial and not unique
        for other_table, other, other_keys, other_partial, _ in found
        if other_table == table
        and other != index
        and not other_partial
        and len(other_keys) >= len(keys)
        and other_keys[: len(keys)] == keys
    ]
    assert not redundant, f"indexes another one makes redundant ({alias}):\n" + "\n".join(redundant)
