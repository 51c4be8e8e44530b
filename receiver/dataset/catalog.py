"""What the application's own database says of its tables (schema `public`): columns, primary
keys, NOT NULL, unique constraints and indexes (expression and partial ones included, by the columns
they read), CHECK constraints, foreign keys (multi-column ones whole) with their ON DELETE rule, and
which tables are partitions of which. A partition is never a table of its own here: its parent is,
and the parent's rows are every partition's.

`reaching` walks the foreign keys from the person's table, transitively: every table whose rows can
point at a person, with each path. The same walk serves `check` (every table reached is named in the
file) and the last effect (every path counted again, in its own transaction): one rule, read from
the catalog as it is at the time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 6  # foreign keys followed from the person's table; as far as a dataset path may go


@dataclass(frozen=True)
class ForeignKey:
    name: str
    table: str
    columns: tuple[str, ...]
    parent: str
    parent_columns: tuple[str, ...]
    on_delete: str  # a: no action, r: restrict, c: cascade, n: set null, d: set default

    @property
    def column(self) -> str:
        return self.columns[0]

    def said(self) -> str:
        """How a person writes it: orders.customer_id -> accounts."""
        return f"{self.table}.{','.join(self.columns)} -> {self.parent}"


@dataclass(frozen=True)
class Unique:
    name: str
    columns: frozenset[str]  # every column it reads: its keys, its expressions' and its predicate's
    expression: bool
    partial: bool


@dataclass(frozen=True)
class Check:
    name: str
    columns: frozenset[str]
    expression: str  # pg_get_expr of the constraint: columns by their bare names


@dataclass
class Table:
    name: str
    columns: dict[str, str] = field(default_factory=dict)  # name -> type
    not_null: set[str] = field(default_factory=set)
    primary_key: list[str] = field(default_factory=list)
    uniques: list[Unique] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    indexed: set[str] = field(default_factory=set)  # columns leading an index
    partitioned: bool = False  # a partitioned table (its rows are its partitions')

    @property
    def unique(self) -> set[str]:
        """Columns some unique constraint or index reads."""
        return {c for u in self.uniques for c in u.columns}


@dataclass
class Catalog:
    tables: dict[str, Table]
    foreign_keys: list[ForeignKey]
    partitions: dict[str, str] = field(default_factory=dict)  # a partition -> its (topmost) parent

    def fk(self, table: str, column: str) -> ForeignKey | None:
        """The foreign key a path's column starts: a one-column key of it first, else one it leads."""
        found = [f for f in self.foreign_keys if f.table == table and column in f.columns]
        return min(found, key=lambda f: (len(f.columns), f.columns.index(column)), default=None)

    def children(self, parent: str) -> list[ForeignKey]:
        return [f for f in self.foreign_keys if f.parent == parent]


Path = tuple[ForeignKey, ...]  # from the table holding the rows to the person's table, key by key


def reaching(cat: Catalog | list[ForeignKey], person_table: str, *, depth: int = MAX_DEPTH) -> list[Path]:
    """Every chain of foreign keys ending at the person's table, at most `depth` keys long, visiting
    no table twice (the person's table never in the middle): breadth first, in a stable order."""
    keys = cat.foreign_keys if isinstance(cat, Catalog) else cat

    def children(parent: str) -> list[ForeignKey]:
        return sorted((f for f in keys if f.parent == parent), key=_order)

    out: list[Path] = []
    frontier: list[Path] = [(f,) for f in children(person_table) if f.table != person_table]
    while frontier:
        out += frontier
        grown: list[Path] = []
        for path in frontier:
            if len(path) >= depth:
                continue
            seen = {person_table, *(f.table for f in path)}
            grown += [(f, *path) for f in children(path[0].table) if f.table not in seen]
        frontier = grown
    return out


def _order(f: ForeignKey) -> tuple[str, tuple[str, ...]]:
    return f.table, f.columns


def read(cur: Any, schema: str = "public") -> Catalog:
    cur.execute(
        """SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, c.relkind = 'p'
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
           WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND NOT c.relispartition
           ORDER BY c.relname, a.attnum""",
        [schema],
    )
    tables: dict[str, Table] = {}
    for table, column, kind, not_null, partitioned in cur.fetchall():
        t = tables.setdefault(table, Table(table, partitioned=partitioned))
        t.columns[column] = kind
        if not_null:
            t.not_null.add(column)
    cur.execute(
        """WITH RECURSIVE up AS (
               SELECT i.inhrelid AS leaf, i.inhparent AS parent FROM pg_inherits i
               JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = %s AND c.relispartition
               UNION ALL
               SELECT up.leaf, i.inhparent FROM up JOIN pg_inherits i ON i.inhrelid = up.parent)
           SELECT l.relname, p.relname FROM up JOIN pg_class l ON l.oid = up.leaf
           JOIN pg_class p ON p.oid = up.parent WHERE NOT p.relispartition""",
        [schema],
    )
    partitions = dict(cur.fetchall())
    cur.execute(
        """SELECT c.relname, con.conname, con.contype, array_agg(a.attname ORDER BY k.ord),
                  CASE WHEN con.contype = 'c' THEN pg_get_expr(con.conbin, con.conrelid) END
           FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
           CROSS JOIN LATERAL unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord)
           JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
           WHERE n.nspname = %s AND con.contype IN ('p', 'c') AND NOT c.relispartition
           GROUP BY c.relname, con.oid, con.conname, con.contype""",
        [schema],
    )
    for table, name, kind, columns, expression in cur.fetchall():
        if table not in tables:
            continue
        if kind == "p":
            tables[table].primary_key = list(columns)
        else:
            tables[table].checks.append(Check(name, frozenset(columns), expression))
    # Every index, by the columns it reads: its keys, and what its expressions and predicate read
    # (pg_depend records those); a unique one constrains them all.
    cur.execute(
        """SELECT t.relname, ic.relname, i.indisunique, i.indexprs IS NOT NULL, i.indpred IS NOT NULL,
                  (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = t.oid AND a.attnum = i.indkey[0]),
                  ARRAY(SELECT a.attname FROM pg_attribute a WHERE a.attrelid = t.oid
                        AND (a.attnum = ANY (i.indkey) OR a.attnum IN (
                             SELECT d.refobjsubid FROM pg_depend d
                             WHERE d.classid = 'pg_class'::regclass AND d.objid = i.indexrelid
                               AND d.refclassid = 'pg_class'::regclass AND d.refobjid = t.oid))
                        AND a.attnum > 0)
           FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_class ic ON ic.oid = i.indexrelid
           JOIN pg_namespace n ON n.oid = t.relnamespace
           WHERE n.nspname = %s AND NOT t.relispartition""",
        [schema],
    )
    for table, name, unique, expression, partial, leading, columns in cur.fetchall():
        if table not in tables:
            continue
        if leading:
            tables[table].indexed.add(leading)
        if unique and columns:
            tables[table].uniques.append(Unique(name, frozenset(columns), expression, partial))
    keys = [f for f in foreign_keys(cur, schema) if f.table in tables and f.parent in tables]
    return Catalog(tables, keys, partitions)


def foreign_keys(cur: Any, schema: str = "public") -> list[ForeignKey]:
    """The foreign keys as declared, in one statement (all the completeness walk reads): on a
    partitioned table, its parent's (a partition's copies have a parent constraint); into a
    partitioned table, the one naming the parent."""
    cur.execute(
        """SELECT con.conname, c.relname, p.relname, con.confdeltype,
                  ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY k(n, o)
                        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.n ORDER BY k.o),
                  ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY k(n, o)
                        JOIN pg_attribute a ON a.attrelid = p.oid AND a.attnum = k.n ORDER BY k.o)
           FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_class p ON p.oid = con.confrelid
           WHERE n.nspname = %s AND con.contype = 'f' AND con.conparentid = 0
             AND NOT c.relispartition AND NOT p.relispartition
           ORDER BY c.relname, con.conname""",
        [schema],
    )
    return [
        ForeignKey(name, t, tuple(cols), p, tuple(pcols), str(rule)) for name, t, p, rule, cols, pcols in cur.fetchall()
    ]
