"""Every index of the project's tables earns its writes: none is a leading part of another.

Each row written to a table is written to every one of its indexes, and an update that changes an
indexed column writes them all again. An index whose columns lead another full index (Django's
automatic one on a foreign key, say, beside a unique constraint that starts with that key) serves
no read the wider one does not, and costs a write on every insert and move.
"""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

OUR_TABLES = ("entity_deletion_%", "retirements_%", "api_%", "ops_%", "core_%", "demo_%")


def _indexes() -> list[tuple[str, str, list[str], bool, bool]]:
    """(table, index, its key columns in order (expressions as text), partial, unique) of every
    btree index on the project's tables."""
    with connection.cursor() as cur:
        cur.execute(
            """SELECT t.relname, i.relname,
                      array(SELECT pg_get_indexdef(x.indexrelid, k + 1, true) FROM generate_subscripts(x.indkey, 1) k
                            WHERE k < x.indnkeyatts ORDER BY k),
                      x.indpred IS NOT NULL, x.indisunique
               FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
               JOIN pg_am am ON am.oid = i.relam
               WHERE am.amname = 'btree' AND t.relname LIKE ANY(%s) AND t.relnamespace = 'public'::regnamespace""",
            [list(OUR_TABLES)],
        )
        return [(table, index, list(keys), partial, unique) for table, index, keys, partial, unique in cur.fetchall()]


def test_no_index_is_a_leading_part_of_another() -> None:
    found = _indexes()
    assert any(table.startswith("entity_deletion_") for table, *_ in found)  # the catalog read finds our tables
    redundant = [
        f"{table}.{index} ({', '.join(keys)}) leads {wider} ({', '.join(wider_keys)})"
        for table, index, keys, partial, unique in found
        if not partial and not unique
        for other_table, wider, wider_keys, wider_partial, _ in found
        if other_table == table
        and wider != index
        and not wider_partial
        and len(wider_keys) > len(keys)
        and wider_keys[: len(keys)] == keys
    ]
    assert not redundant, "indexes that a wider one makes redundant:\n" + "\n".join(redundant)
