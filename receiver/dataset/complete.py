"""Complete, or not called complete: what remains of a person after their last effect, read in that
effect's own transaction.

The catalog's foreign keys are read again (a table added since `install` is seen) and every chain of foreign keys
into the person's table is counted (`catalog.reaching`, the walk `check` refuses unnamed tables by).
A chain's rows may remain only under a table the file keeps or anonymizes (the nearest such table to
the person holds them: a reply by someone else under the person's anonymized review stays, with the
review); anything else, an unnamed table included, is data that remains. The file's identities are
counted the same way (a row still holding the person's e-mail in a table the file deletes), and every
anonymized row (the person's own row too) is checked to hold what the file says.

`run` is one effect as the receiver applies it: the generated `receiver.apply`, and, for the person's
own records (the last effect), this walk; data that remains refuses the effect (`Incomplete`), which
rolls back whole. The rehearsal runs the same function.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from receiver.dataset import catalog
from receiver.dataset.compile import Compiled, Entry, Identity, digest, own_records_id, person_match, value
from wire.sql import Statements

SQL = Statements.beside(__file__, "backend.sql")


class Incomplete(Exception):
    """Data of the person remains that the file does not keep: the effect is refused, nothing applied."""

    def __init__(self, left: dict[str, int]) -> None:
        said = "; ".join(f"{where}: {n}" for where, n in left.items())
        super().__init__(
            f"data remains that the dataset file does not keep: {said}; nothing of this last effect was applied"
        )
        self.left = left


class Mismatched(Exception):
    """The database holds another version of the rules than the file this receiver was started with."""


@dataclass
class Remains:
    left: dict[str, int] = field(default_factory=dict)  # where -> rows: the person's data the file does not keep
    kept: dict[str, dict[str, Any]] = field(default_factory=dict)  # table -> references, rule, reason
    paths: int = 0
    identities: int = 0
    anonymized: int = 0

    def evidence(self) -> dict[str, Any]:
        return {
            "remains": self.kept,
            "catalog_walk": {
                "foreign_key_paths": self.paths,
                "identity_columns": self.identities,
                "anonymized_tables_checked": self.anonymized,
            },
        }


def _rule(c: Compiled, table: str) -> tuple[str, str]:
    """What the file says of a table's rows: (delete | anonymize | keep | unnamed, reason)."""
    if table == c.memberships["table"]:
        return "delete", ""
    e = c.entry(table)
    return (e.action, e.reason) if e is not None else ("unnamed", "")


def _through(path: catalog.Path, pk: str) -> str:
    """A count of the rows at the far end of a chain of keys that ends at the person %(person)s."""
    out, alias = [f"SELECT count(*) FROM {_q(path[0].table)} t0"], "t0"
    for i, fk in enumerate(path[:-1], start=1):
        on = " AND ".join(
            f"t{i}.{_q(p)} = {alias}.{_q(col)}" for col, p in zip(fk.columns, fk.parent_columns, strict=True)
        )
        out.append(f"JOIN {_q(fk.parent)} t{i} ON {on}")
        alias = f"t{i}"
    last = path[-1]
    if last.parent_columns == (pk,):
        out.append(f"WHERE {alias}.{_q(last.columns[0])} = %(person)s")
    else:
        cols = ", ".join(f"{alias}.{_q(col)}" for col in last.columns)
        parents = ", ".join(f"u.{_q(p)}" for p in last.parent_columns)
        out.append(f"WHERE ({cols}) = (SELECT {parents} FROM {_q(last.parent)} u WHERE u.{_q(pk)} = %(person)s)")
    return " ".join(out)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _not_anonymized(c: Compiled, e: Entry) -> str:
    """The person's rows of an anonymized entry that do not hold what the file says."""
    pj, pc = person_match(e, "%(person)s", identity=lambda name: f"%(identity_{name})s")
    types = c.types[e.table]
    differs = " OR ".join(
        f"t0.{_q(col)} IS DISTINCT FROM {value(rule, types[col], e.pk, 't0')}" for col, rule in e.anonymize.items()
    )
    return f"SELECT count(*) FROM {_q(e.table)} t0 {pj} WHERE {pc} AND ({differs})"


def remains(cur: Any, c: Compiled, person: Any, identities: dict[str, Any]) -> Remains:
    """What of the person remains now, by the file's own rules; counted in one statement."""
    paths = catalog.reaching(catalog.foreign_keys(cur), c.person_table)
    counts: list[tuple[str, str, str, str]] = []  # (sql, where, rule, reason)
    for path in paths:
        tip = path[0].table
        holder = next((f.table for f in reversed(path) if _rule(c, f.table)[0] in ("keep", "anonymize")), None)
        how = " then ".join(f.said() for f in path)
        if holder is None:
            rule = _rule(c, tip)[0]
            note = " (a table the dataset file does not name)" if rule == "unnamed" else ""
            counts.append((_through(path, c.person_pk), f"{tip} ({how}){note}", "left", ""))
        else:
            kind, reason = _rule(c, holder)
            where = tip if tip == holder else f"{tip} under {holder}"
            counts.append((_through(path, c.person_pk), where, kind, reason))
    ids = [e for e in c.entries if isinstance(e.person, Identity)]
    for e in ids:
        assert isinstance(e.person, Identity)
        sql = f"SELECT count(*) FROM {_q(e.table)} t0 WHERE t0.{_q(e.person.column)} = %(identity_{e.person.name})s"
        if e.action == "delete":
            counts.append((sql, f"{e.table} (its {e.person.column} holds the person's {e.person.name})", "left", ""))
        else:
            counts.append((sql, e.table, e.action, e.reason))
    checked = [e for e in c.entries if e.action == "anonymize"]
    for e in checked:
        counts.append((_not_anonymized(c, e), f"{e.table} (rows not anonymized as the file says)", "left", ""))
    if c.person_anonymize:
        types = c.types[c.person_table]
        differs = " OR ".join(
            f"t0.{_q(col)} IS DISTINCT FROM {value(rule, types[col], (c.person_pk,), 't0')}"
            for col, rule in c.person_anonymize.items()
        )
        counts.append(
            (
                f"SELECT count(*) FROM {_q(c.person_table)} t0 WHERE t0.{_q(c.person_pk)} = %(person)s AND ({differs})",
                f"{c.person_table} (the person's own row, not anonymized as the file says)",
                "left",
                "",
            )
        )
    found: list[int] = []
    if counts:
        cur.execute(
            "SELECT " + ", ".join(f"({sql})" for sql, *_ in counts),
            {"person": person, **{f"identity_{n}": v for n, v in identities.items()}},
        )
        found = [int(n) for n in cur.fetchone()]
    out = Remains(paths=len(paths), identities=len(ids), anonymized=len(checked))
    for (_, where, rule, reason), n in zip(counts, found, strict=True):
        if rule == "left":
            if n:
                out.left[where] = out.left.get(where, 0) + n
        elif n:
            kept = out.kept.setdefault(where, {"references": 0, "rule": rule, **({"reason": reason} if reason else {})})
            kept["references"] += n
    return out


def run(
    cur: Any, c: Compiled, params: dict[str, Any], bounded: Callable[[], None] = lambda: None
) -> tuple[bool, dict[str, Any], str, Any]:
    """One effect in the caller's transaction: (replayed, evidence, the grant it was made under, when).
    The last one (the person's own records) is walked before it may stand; Incomplete refuses it.
    `bounded` is called before the walk (the receiver gives it what is left of its bound on the whole
    transaction; the reads and the record around the two are by primary key)."""
    last = str(params.get("community_id") or "") == own_records_id(c.dataset)
    person: Any = None
    identities: dict[str, Any] = {}
    if last:  # read before anything changes: the person's row is anonymized by this very effect
        person, identities = _person(cur, c, str(params["handle"]))
    recorded, evidence, made_under, applied_at = SQL.one(cur, "apply", **params) or (False, "{}", "", None)
    said = json.loads(evidence) if isinstance(evidence, str) else dict(evidence)
    if not recorded and said.get("dataset_digest") != digest(c.data):
        raise Mismatched(
            f"this receiver serves dataset {c.dataset} v{c.version}, but the database has "
            f"v{said.get('dataset_version')} installed: start it again with the installed file; nothing was applied"
        )
    if last and not recorded and person is not None:
        bounded()
        found = remains(cur, c, person, identities)
        if found.left:
            raise Incomplete(found.left)
        said |= found.evidence()
        SQL.one(cur, "record_walk", operation_id=params["operation_id"], evidence=json.dumps(said))
    return bool(recorded), said, made_under, applied_at


def broken(c: Compiled, table: str | None, constraint: str | None, message: str) -> str:
    """A constraint the application's database enforced, said with the dataset file's entry."""
    entry = c.where(table) if table else "the dataset file"
    named = f" constraint {constraint}" if constraint else ""
    return (
        f"the application's database refused {entry} (table {table or 'unknown'}{named}): {message}; nothing was "
        "applied: correct the dataset file, check it with --rehearse and install it again"
    )


def _person(cur: Any, c: Compiled, handle: str) -> tuple[Any, dict[str, Any]]:
    """The person's primary key (typed) and identities, as their row holds them now."""
    names = list(c.identities)
    cols = "".join(f", u.{_q(c.identities[n])}" for n in names)
    cur.execute(
        f"SELECT u.{_q(c.person_pk)}{cols} FROM {_q(c.person_table)} u WHERE u.{_q(c.person_pk)} = "
        f"(SELECT p.person_pk::{c.person_pk_type} FROM receiver.receiver_people p WHERE p.person_key = %(handle)s)",
        {"handle": handle},
    )
    row = cur.fetchone()
    if row is None:
        return None, {}
    return row[0], dict(zip(names, row[1:], strict=True))
