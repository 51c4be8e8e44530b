"""What the application's own database says of its tables (schema `public`): columns, primary
keys, unique and not-null columns, foreign keys with their ON DELETE rule, and indexes. The
dataset receiver derives delete order, cascades and version triggers from this, never by hand."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ForeignKey:
    table: str
    column: str
    parent: str
    parent_column: str
    on_delete: str  # a: no action, r: restrict, c: cascade, n: set null, d: set default


@dataclass
class Table:
    name: str
    columns: dict[str, str] = field(default_factory=dict)  # name -> type
    not_null: set[str] = field(default_factory=set)
    primary_key: list[str] = field(default_factory=list)
    unique: set[str] = field(default_factory=set)  # single-column unique constraints or indexes
    indexed: set[str] = field(default_factory=set)  # columns leading an index


@dataclass
class Catalog:
    tables: dict[str, Table]
    foreign_keys: list[ForeignKey]

    def fk(self, table: str, column: str) -> ForeignKey | None:
        return next((f for f in self.foreign_keys if f.table == table and f.column == column), None)

    def children(self, parent: str) -> list[ForeignKey]:
        return [f for f in self.foreign_keys if f.parent == parent]


def read(cur: Any, schema: str = "public") -> Catalog:
    cur.execute(
        """SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
           WHERE n.nspname = %s AND c.relkind IN ('r', 'p') ORDER BY c.relname, a.attnum""",
        [schema],
    )
    tables: dict[str, Table] = {}
    for table, column, kind, not_null in cur.fetchall():
        t = tables.setdefault(table, Table(table))
        t.columns[column] = kind
        if not_null:
            t.not_null.add(column)
    cur.execute(
        """SELECT c.relname, con.contype, array_agg(a.attname ORDER BY k.ord)
           FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
           CROSS JOIN LATERAL unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord)
           JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
           WHERE n.nspname = %s AND con.contype IN ('p', 'u') GROUP BY c.relname, con.oid, con.contype""",
        [schema],
    )
    for table, kind, columns in cur.fetchall():
        if table not in tables:
            continue
        if kind == "p":
            tables[table].primary_key = list(columns)
        elif len(columns) == 1:
            tables[table].unique.add(columns[0])
    cur.execute(
        """SELECT t.relname, i.indisunique, i.indnkeyatts, a.attname
           FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
           JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = i.indkey[0]
           WHERE n.nspname = %s""",
        [schema],
    )
    for table, unique, keys, column in cur.fetchall():
        if table in tables:
            tables[table].indexed.add(column)
            if unique and keys == 1:
                tables[table].unique.add(column)
    cur.execute(
        """SELECT c.relname, a.attname, p.relname, pa.attname, con.confdeltype
           FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_class p ON p.oid = con.confrelid
           JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = con.conkey[1]
           JOIN pg_attribute pa ON pa.attrelid = p.oid AND pa.attnum = con.confkey[1]
           WHERE n.nspname = %s AND con.contype = 'f' AND cardinality(con.conkey) = 1
           ORDER BY c.relname, a.attname""",
        [schema],
    )
    fks = [ForeignKey(t, c, p, pc, str(rule)) for t, c, p, pc, rule in cur.fetchall()]
    return Catalog(tables, fks)
