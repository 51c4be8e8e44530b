"""An independent reader of an application's database, for the completeness property tests: its own
walk of the foreign keys (from information_schema, not the receiver's catalog code), a dump of every
row, and the receiver's effects run one by one as the receiver runs them (each its own transaction).

Nothing here decides what a deletion should do from the receiver's code: the expectations come from
the dataset file as YAML and from the rows themselves."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import yaml
from django.db import connection

from core.store import connection_url


@contextmanager
def scratch_database(prefix: str) -> Iterator[str]:
    """A fresh database on the test server; its URL, dropped after."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    base = connection_url()
    if "?" in base:
        head, query = base.split("?", 1)
        url = head.rsplit("/", 1)[0] + f"/{name}?{query}"
    else:
        url = base.rsplit("/", 1)[0] + f"/{name}"
    try:
        yield url
    finally:
        with connection.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass(frozen=True)
class Key:
    table: str
    columns: tuple[str, ...]
    parent: str
    parent_columns: tuple[str, ...]


def foreign_keys(cur: Any) -> list[Key]:
    """Every foreign key of schema public as information_schema states it (a partition's copies left out)."""
    cur.execute(
        """SELECT tc.constraint_name, tc.table_name, kcu.column_name, ccu.table_name, ccu.column_name,
                  kcu.ordinal_position
           FROM information_schema.table_constraints tc
           JOIN information_schema.key_column_usage kcu
             ON kcu.constraint_name = tc.constraint_name AND kcu.table_schema = tc.table_schema
            AND kcu.table_name = tc.table_name
           JOIN information_schema.referential_constraints rc
             ON rc.constraint_name = tc.constraint_name AND rc.constraint_schema = tc.table_schema
           JOIN information_schema.key_column_usage ccu
             ON ccu.constraint_name = rc.unique_constraint_name AND ccu.table_schema = rc.unique_constraint_schema
            AND ccu.ordinal_position = kcu.position_in_unique_constraint
           WHERE tc.constraint_type = 'FOREIGN KEY' AND tc.table_schema = 'public'
             AND tc.table_name NOT IN (SELECT c.relname FROM pg_class c WHERE c.relispartition)
             AND ccu.table_name NOT IN (SELECT c.relname FROM pg_class c WHERE c.relispartition)
           ORDER BY 1, 2, 6"""
    )
    grouped: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for name, table, column, parent, parent_column, _ in cur.fetchall():
        grouped.setdefault((name, table), []).append((column, parent, parent_column))
    return [
        Key(table, tuple(c for c, _, _ in cols), cols[0][1], tuple(p for _, _, p in cols))
        for (_, table), cols in sorted(grouped.items())
    ]


def tables(cur: Any) -> list[str]:
    cur.execute(
        """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1"""
    )
    return [t for (t,) in cur.fetchall()]


Row = str  # a row as canonical JSON: compared byte for byte


def dump(cur: Any) -> dict[str, set[Row]]:
    out = {}
    for t in tables(cur):
        cur.execute(f'SELECT to_jsonb(t)::text FROM "{t}" t')
        out[t] = {json.dumps(json.loads(r), sort_keys=True) for (r,) in cur.fetchall()}
    return out


@dataclass(frozen=True)
class Reached:
    table: str
    row: Row
    first: str  # the table whose key points at the person's row itself
    data: dict[str, Any]


def reached(cur: Any, person_table: str, pk: str, person: Any, keys: list[Key], depth: int = 6) -> list[Reached]:
    """Every row that points at the person's row through foreign keys, transitively (by value, table by table)."""
    out: list[Reached] = []
    frontier: list[tuple[str, list[dict[str, Any]], str | None]] = [(person_table, [{pk: person}], None)]
    seen: set[tuple[str, Row]] = set()
    for _ in range(depth):
        nxt: list[tuple[str, list[dict[str, Any]], str | None]] = []
        for parent, rows, first in frontier:
            for k in keys:
                if k.parent != parent or (k.table == person_table and first is None):
                    continue
                values = [tuple(r.get(c) for c in k.parent_columns) for r in rows]
                values = [v for v in values if None not in v]
                if not values:
                    continue
                cols = ", ".join(f'"{c}"' for c in k.columns)
                arrays = ", ".join(f"%s::{_kind(cur, k.parent, p)}[]" for p in k.parent_columns)
                cur.execute(
                    f'SELECT to_jsonb(t)::text FROM "{k.table}" t WHERE ({cols}) IN (SELECT * FROM unnest({arrays}))',
                    [list(v[i] for v in values) for i in range(len(k.parent_columns))],
                )
                found = []
                for (text,) in cur.fetchall():
                    data = json.loads(text)
                    row = json.dumps(data, sort_keys=True)
                    if (k.table, row) in seen:
                        continue
                    seen.add((k.table, row))
                    out.append(Reached(k.table, row, first or k.table, data))
                    found.append(data)
                if found:
                    nxt.append((k.table, found, first or k.table))
        frontier = nxt
    return out


_KINDS: dict[tuple[str, str], str] = {}


def _kind(cur: Any, table: str, column: str) -> str:
    if (table, column) not in _KINDS:
        cur.execute(
            "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a WHERE a.attrelid = %s::regclass "
            "AND a.attname = %s",
            [f'public."{table}"', column],
        )
        _KINDS[(table, column)] = cur.fetchone()[0]
    return _KINDS[(table, column)]


def text_holding(cur: Any, needle: str) -> dict[str, int]:
    """Every text column of every table holding exactly this value (an e-mail, a handle)."""
    cur.execute(
        """SELECT c.table_name, c.column_name FROM information_schema.columns c
           WHERE c.table_schema = 'public' AND c.data_type IN ('text', 'character varying')
             AND c.table_name NOT IN (SELECT relname FROM pg_class WHERE relispartition)"""
    )
    found = {}
    for table, column in cur.fetchall():
        cur.execute(f'SELECT count(*) FROM "{table}" WHERE lower("{column}") = lower(%s)', [needle])
        n = cur.fetchone()[0]
        if n:
            found[f"{table}.{column}"] = n
    return found


def rules(dataset: Path) -> dict[str, Any]:
    return dict(yaml.safe_load(dataset.read_text()))


def action(spec: dict[str, Any], table: str) -> str:
    """What the file says of a table: delete, anonymize, keep, or '' (not named)."""
    if table == spec["communities"]["memberships"]["table"]:
        return "delete"
    entry = spec["tables"].get(table)
    if entry is None:
        return ""
    a = entry["action"]
    return a if isinstance(a, str) else "anonymize"


def delete_person(url: str, compiled: Any, handle: str) -> list[dict[str, Any]]:
    """The person's deletion as the receiver applies it, effect by effect, each its own transaction:
    the preview, the gate with every version, then each community (and its agents), their own records
    last. The evidence of each."""
    from receiver.dataset import complete

    target = f"{compiled.data['prefix']}{handle}"
    evidence = []
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT community_id, version, n_agents FROM receiver.preview(%s)", [target])
        places = cur.fetchall()
        request = str(uuid.uuid4())

        def effect(action: str, community: Any, **extra: Any) -> dict[str, Any]:
            now = datetime.now(UTC)
            params = {
                "operation_id": str(uuid.uuid4()),
                "request_id": request,
                "generation": 1,
                "epoch": 0,
                "action": action,
                "community_id": community,
                "handle": target,
                "expected_version": None,
                "expected_versions": None,
                "executor": "property-test",
                "grant": "property-test",
                "now": now,
                "applied_at": now.isoformat(),
                **extra,
            }
            with conn.transaction():
                _, said, _, _ = complete.run(cur, compiled, params)
            evidence.append(said)
            return said

        effect("gate_user", None, expected_versions=json.dumps({str(c): v for c, v, _ in places}))
        for community, version, _ in places:
            said = effect("purge_db", str(community), expected_version=version)
            if said.get("has_agents"):
                effect("purge_agents", str(community), expected_version=said["version_after"])
    return evidence
