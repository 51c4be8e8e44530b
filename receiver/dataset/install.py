"""`python -m receiver check DATASET [--rehearse N]` and `python -m receiver install DATASET`.

The file is checked against the application's catalog (`compile.check`), then against what only
the database can say (`probe`: every anonymized value cast to its column's type and held against the
CHECK constraints that read it; no other person's row hanging under a row the file deletes), then
rehearsed (`rehearse`: the generated apply run for N real people, gate to last effect with the
completeness walk, inside a transaction that is rolled back). A refusal names the entry, in one line,
and installs nothing. `install` rehearses a few people by default and installs in one transaction.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg
from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from receiver import ALIAS, effects
from receiver.dataset import catalog, compile, complete
from receiver.dataset.compile import Compiled, Entry, Identity, Refused, joins, literal, value

INSTALL_REHEARSES = 3  # people rehearsed before an install, unless told otherwise


class _Rollback(Exception):
    pass


def run(path: str, *, write: bool, rehearse: int | None = None) -> str:
    data = compile.load(path)
    people = INSTALL_REHEARSES if rehearse is None and write else rehearse or 0
    with connections[ALIAS].cursor() as cur:
        cat = catalog.read(cur)
    c = compile.check(data, cat)
    with connections[ALIAS].cursor() as cur:
        probe(cur, c, cat)
    order = ", ".join(e.table for e in c.entries if e.action != "keep")
    kept = ", ".join(f"{e.table} ({e.reason})" for e in c.entries if e.action == "keep")
    unindexed = [
        f"{hop.table}.{hop.columns[0]}"
        for e in c.entries
        if not isinstance(e.person, Identity)
        for hop in (*e.person, *(e.community or ()))
        if hop.columns[0] not in cat.tables[hop.table].indexed
    ]
    unindexed += [
        f"{c.person_table}.{column} (an identity: each write to a table holding it looks the person up)"
        for column in c.identities.values()
        if column not in cat.tables[c.person_table].indexed
    ]
    note = f"; paths through unindexed columns (each apply scans them): {', '.join(unindexed)}" if unindexed else ""
    note += f"; kept: {kept}" if kept else ""
    said: list[str] = []
    if people:
        tried = rehearse_people(c, people)
        if tried.failures:
            raise Refused(f"rehearsal: {tried.failures[0]}")
        said = tried.lines()
    head = f"dataset {data['dataset']} v{data['version']}"
    if not write:
        return "\n".join([f"{head}: checked; delete order {order}{note}", *said])
    with transaction.atomic(using=ALIAS), connections[ALIAS].cursor() as cur:
        cur.execute(compile.install_sql(c))
    return "\n".join([f"{head}: installed in schema receiver; delete order {order}{note}", *said])


# --- what only the database can say ---------------------------------------------------------------


def _fails(cur: Any, sql: str, params: dict[str, Any] | None = None) -> str | None:
    """Run a statement in a savepoint: None, or PostgreSQL's first line of why it failed."""
    try:
        with transaction.atomic(using=ALIAS):
            cur.execute(sql, params or {})
            row = cur.fetchone() if cur.description else None
    except DatabaseError as exc:
        cause = exc.__cause__
        return str(cause.diag.message_primary if isinstance(cause, psycopg.Error) else exc).splitlines()[0]
    if row is not None and row[0] not in (None, 0, True):
        return str(row[0])
    return None


def probe(cur: Any, c: Compiled, cat: catalog.Catalog) -> None:
    """Refused, naming the entry, for a value its column cannot hold or a CHECK it breaks, and for a
    delete that would break (or cascade into) another person's rows."""
    anonymized: list[tuple[str, str, dict[str, Any], tuple[str, ...]]] = [
        ("person.action", c.person_table, c.person_anonymize, (c.person_pk,))
    ]
    anonymized += [(f"{e.where}.action", e.table, e.anonymize, e.pk) for e in c.entries if e.action == "anonymize"]
    for where, table, rules, pk in anonymized:
        types = c.types[table]
        for column, rule in rules.items():
            if rule is None:
                continue
            shown = "a tombstone ('deleted-<key>')" if rule == "tombstone" else repr(rule)
            sample = "deleted-1" if rule == "tombstone" else str(rule)
            why = _fails(cur, f"SELECT CAST({literal(sample)} AS {types[column]}) IS NULL")
            if why is not None:
                raise Refused(f"{where}: {table}.{column} is {types[column]}: {shown} is no value of it ({why})")
        _checks(cur, where, cat.tables[table], rules, pk)
    for e in c.entries:
        if e.action == "delete":
            _others_under(cur, c, cat, e)


def _checks(cur: Any, where: str, t: catalog.Table, rules: dict[str, Any], pk: tuple[str, ...]) -> None:
    """Each CHECK reading an anonymized column, held against the anonymized values: on the table's rows
    (their other columns as they are), and on a row of those values alone when it reads nothing else."""
    for check in t.checks:
        if not check.columns & set(rules):
            continue
        columns = ", ".join(
            f"{value(rules[col], kind, pk, 't0') if col in rules else f't0.{_q(col)}'} AS {_q(col)}"
            for col, kind in t.columns.items()
        )
        rows = (
            f"SELECT count(*) FROM (SELECT {columns} FROM {_q(t.name)} t0 LIMIT 10000) x WHERE NOT ({check.expression})"
        )
        why = _fails(cur, rows)
        if why is None and check.columns <= set(rules):
            alone = ", ".join(
                f"{value(rules[col], t.columns[col], pk, 'k') if rules[col] != 'tombstone' else literal('deleted-1')}"
                f" AS {_q(col)}"
                for col in sorted(check.columns)
            )
            keys = ", ".join(f"1 AS {_q(k)}" for k in pk if k not in check.columns)
            probe = (
                f"SELECT count(*) FROM (SELECT {alone}{', ' if keys else ''}{keys}) x WHERE NOT ({check.expression})"
            )
            why = _fails(cur, probe)
        if why is not None:
            said = "rows would break it" if why.isdigit() else why
            raise Refused(f"{where}: breaks the CHECK constraint {check.name} of {t.name} ({check.expression}): {said}")


def _others_under(cur: Any, c: Compiled, cat: catalog.Catalog, e: Entry) -> None:
    """Rows that point at the person's rows of a table the file deletes, through a key that would fail
    (NO ACTION, RESTRICT) or cascade: refused when they belong to someone else, or to a table the file
    does not delete (its rows would block the delete, or vanish with it)."""
    if isinstance(e.person, Identity):
        return
    for fk in cat.children(e.table):
        if fk.on_delete in ("n", "d") or fk.table == c.memberships["table"]:
            continue
        child = c.entry(fk.table)
        pj, pe = joins(e.person, "p")
        on = " AND ".join(f"k0.{_q(col)} = t0.{_q(p)}" for col, p in zip(fk.columns, fk.parent_columns, strict=True))
        sql = f"SELECT count(*) FROM {_q(e.table)} t0 {pj} JOIN {_q(fk.table)} k0 ON {on}"
        if child is not None and child.action == "delete" and not isinstance(child.person, Identity):
            qj, qe = joins(child.person, "q", start="k0")
            sql += f" {qj} WHERE {qe[0]} IS DISTINCT FROM {pe[0]}"
            whose = "other people's rows"
        else:
            sql += f" WHERE {pe[0]} IS NOT NULL"
            whose = f"rows the file does not delete ({fk.table}: {child.action if child else 'not named'})"
        n = _count(cur, sql)
        if n:
            rule = {"a": "NO ACTION", "r": "RESTRICT", "c": "CASCADE"}[fk.on_delete]
            harm = "delete them too" if fk.on_delete == "c" else "fail on them"
            raise Refused(
                f"{e.where}: {n} of {whose} point at rows of {e.table} the file deletes ({fk.said()}, ON DELETE "
                f"{rule}): deleting would {harm}; anonymize {e.table} instead, or make the key ON DELETE SET NULL"
            )


def _count(cur: Any, sql: str) -> int:
    cur.execute(sql)
    return int(cur.fetchone()[0])


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --- the rehearsal -----------------------------------------------------------------------------------


@dataclass
class Rehearsal:
    people: int = 0
    changed: dict[str, dict[str, int]] = field(default_factory=dict)  # table -> action -> rows
    kept: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"rehearsed for {self.people} people (rolled back; nothing changed):"]
        for table, by in sorted(self.changed.items()):
            out.append(f"  {table}: " + ", ".join(f"{n} {action}" for action, n in sorted(by.items())))
        for table, n in sorted(self.kept.items()):
            out.append(f"  {table}: {n} kept")
        return out


def rehearse_people(c: Compiled, people: int) -> Rehearsal:
    """The generated apply, gate to last effect, for `people` real people of the application, in a
    transaction that is rolled back whatever happens."""
    out = Rehearsal()
    try:
        with transaction.atomic(using=ALIAS), connections[ALIAS].cursor() as cur:
            cur.execute(compile.install_sql(c))
            cur.execute(
                f"SELECT {_q(c.person_key)}::text FROM {_q(c.person_table)} ORDER BY {_q(c.person_pk)} LIMIT %s",
                [people],
            )
            for (key,) in cur.fetchall():
                out.people += 1
                failure = _rehearse_one(cur, c, f"{c.data['prefix']}{key}", out)
                if failure:
                    out.failures.append(f"person {key}: {failure}")
            raise _Rollback
    except _Rollback:
        pass
    return out


def _rehearse_one(cur: Any, c: Compiled, target: str, out: Rehearsal) -> str | None:
    try:
        with transaction.atomic(using=ALIAS):
            cur.execute(complete.SQL.sql("preview"), {"handle": target})
            places = list(cur.fetchall())
            now = timezone.now()
            base = {
                "request_id": str(uuid.uuid4()),
                "generation": 1,
                "epoch": 0,
                "handle": target,
                "executor": "rehearsal",
                "grant": "rehearsal",
                "now": now,
                "applied_at": now.isoformat(),
                "expected_version": None,
            }
            versions = {str(cid): int(version) for cid, *_, version in places}
            gate = {**base, "action": "gate_user", "community_id": None, "expected_versions": json.dumps(versions)}
            complete.run(cur, c, {**gate, "operation_id": str(uuid.uuid4())})
            for cid, *_, version in places:
                step = {**base, "community_id": str(cid), "expected_versions": None}
                _, said, _, _ = complete.run(
                    cur,
                    c,
                    {**step, "action": "purge_db", "operation_id": str(uuid.uuid4()), "expected_version": version},
                )
                _tally(said, out)
                if said.get("has_agents"):
                    _, said, _, _ = complete.run(
                        cur,
                        c,
                        {
                            **step,
                            "action": "purge_agents",
                            "operation_id": str(uuid.uuid4()),
                            "expected_version": said["version_after"],
                        },
                    )
                    _tally(said, out)
            raise _Rollback
    except _Rollback:
        return None
    except complete.Incomplete as exc:
        return str(exc)
    except DatabaseError as exc:
        cause = exc.__cause__
        if not isinstance(cause, psycopg.Error):
            raise
        if cause.sqlstate == effects.REFUSAL:
            return f"refused ({cause.diag.message_primary}: {cause.diag.message_detail})"
        table, constraint = cause.diag.table_name, cause.diag.constraint_name
        first = (cause.diag.message_primary or str(cause)).splitlines()[0]
        return complete.broken(c, table, constraint, first)


def _tally(said: dict[str, Any], out: Rehearsal) -> None:
    for table, t in said.get("tables", {}).items():
        if t.get("changed"):
            by = out.changed.setdefault(table, {})
            action = "deleted" if t["action"] == "delete" else "anonymized"
            by[action] = by.get(action, 0) + int(t["changed"])
    for table, k in said.get("kept", {}).items():
        if k.get("rows"):
            out.kept[table] = out.kept.get(table, 0) + int(k["rows"])
