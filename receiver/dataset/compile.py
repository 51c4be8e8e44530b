"""A dataset file, checked against the application's catalog, and the SQL that installs the
receiver into that database (schema `receiver`).

`load` reads the YAML and checks it against `schema.json`; `check` resolves every path through the
catalog's foreign keys (or a declared identity) and refuses, naming the entry, what cannot be done
safely or completely: an unknown table or column, a path that does not reach the person or a
community, a table without a primary key, a partition named instead of its parent, a table that
reaches the person's table through foreign keys (directly or through others) and is not named, a
`keep` without a reason, a cascade into a table the file does not delete, a cycle, a self-reference
that a delete would cascade through, an anonymization that would break a NOT NULL, primary key or
unique column (expression and partial unique indexes included). What only the database can say (a
value's cast, a CHECK, another person's rows hanging under the person's) is `probe`'s, with a cursor.

`install_sql` is then the receiver's own tables, the version triggers of each table that changes (a
person's data version in a community moves with every row of theirs written there, by the
application or by the receiver: by as many rows, once per statement), the function that finds every
place a person's rows are (`receiver.places`: their memberships and every community a named table
puts their rows in), the preview, and one plpgsql apply function for the dataset, so the fence, the epoch, the expected
version, the effect and the operation record commit in the application's own transaction.

The plan a person's deletion follows: the gate (every approved version checked, nothing changed),
then each community (`purge_db`, then `purge_agents` when agents exist), then **their own records**,
always last (a community of its own in the inventory, `OWN_RECORDS`): the rows of the tables that
belong to no community (and rows of community tables that name none), then the person's own row,
then the completeness walk (`complete.remains`), all in that last effect's transaction. Every file
lists them, even one whose person can have nothing in no community (the demo application's): that
effect is where the walk runs, so no deletion is called complete without it. A community keyed by a
UUID keeps it as its id in the protocol (`place_id`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from receiver.dataset.catalog import Catalog, reaching

SCHEMA = json.loads((Path(__file__).parent / "schema.json").read_text())
OWN = "*"  # the community key of a person's own records (receiver_versions.community_pk)
OWN_RECORDS_ROLE = "own_records"
NOT_A_MEMBER = "not_a_member"
STAGES = ("purge_db", "purge_agents")
# The version triggers' names (`_triggers`): a row trigger (before schema version 3, and a partitioned
# table's), or one statement trigger per event.
TRIGGERS = ("receiver_version", "receiver_version_insert", "receiver_version_update", "receiver_version_delete")


class Refused(Exception):
    """The dataset file cannot be installed as written; the message names the entry. Nothing is installed."""


def load(path: str | Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise Refused(f"{path}: not a readable YAML file ({type(exc).__name__})") from None
    errors = sorted(jsonschema.Draft202012Validator(SCHEMA).iter_errors(data), key=lambda e: list(e.path))
    if errors:
        where = ".".join(str(p) for p in errors[0].path) or "the file"
        message = errors[0].message.replace("\n", " ")
        if len(message) > 200:
            message = message[:200] + "…"
        raise Refused(f"{path}: {where}: {message}")
    return dict(data)


def digest(data: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def own_records_id(dataset: str) -> str:
    """The id the person's own records go by in an inventory (the same formula as `community_id`)."""
    return community_id(dataset, OWN)


def community_id(dataset: str, key: str) -> str:
    """A community's id in the protocol: a UUID from the dataset's name and the community's key (a
    community keyed by a UUID keeps it: `place_id`)."""
    return str(uuid.UUID(hashlib.md5(f"{dataset}|{key}".encode()).hexdigest()))


def place_id(c: Compiled, key: str) -> str:
    """The SQL of a place's id in the protocol, from the SQL of its key as text: a community keyed by a
    UUID keeps its key (already unique everywhere), any other is named from the dataset and its key."""
    if c.community_pk_type == "uuid":
        return f"({key})::uuid"
    return f"md5({literal(c.dataset + '|')} || {key})::uuid"


@dataclass(frozen=True)
class Hop:
    table: str  # the table the columns are on
    columns: tuple[str, ...]
    parent: str  # the table they reference
    parent_columns: tuple[str, ...]


@dataclass(frozen=True)
class Identity:
    """A person's identifier held without a foreign key: `column` of the entry's table equals the
    person's own `person_column` (declared in the file under `identities`)."""

    name: str
    column: str
    person_column: str


@dataclass(frozen=True)
class Entry:
    table: str
    pk: tuple[str, ...]
    person: tuple[Hop, ...] | Identity
    community: tuple[Hop, ...] | None  # None: the table belongs to no community
    action: str  # delete | anonymize | keep
    anonymize: dict[str, Any]
    reason: str  # keep's
    stage: str

    @property
    def where(self) -> str:
        return f"tables.{self.table}"


@dataclass(frozen=True)
class Compiled:
    data: dict[str, Any]
    person_table: str
    person_pk: str
    person_pk_type: str
    person_key: str
    person_anonymize: dict[str, Any]
    identities: dict[str, str]  # name -> the person table's column
    community_table: str
    community_pk: str
    community_pk_type: str
    community_name: str
    memberships: dict[str, str]
    entries: list[Entry]  # in delete order: children before parents
    types: dict[str, dict[str, str]]  # table -> column -> type, for every table named
    partitioned: frozenset[str] = frozenset()  # the tables named that are partitioned

    @property
    def dataset(self) -> str:
        return str(self.data["dataset"])

    @property
    def version(self) -> int:
        return int(self.data["version"])

    def entry(self, table: str) -> Entry | None:
        return next((e for e in self.entries if e.table == table), None)

    def where(self, table: str) -> str:
        """The file's entry a table is named by."""
        if table == self.person_table:
            return "person.action"
        if table == self.memberships["table"]:
            return "communities.memberships"
        return f"tables.{table}"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _path(cat: Catalog, where: str, table: str, raw: Any, end: str) -> tuple[Hop, ...]:
    columns = [raw] if isinstance(raw, str) else list(raw)
    hops: list[Hop] = []
    at = table
    for column in columns:
        if column not in cat.tables[at].columns:
            raise Refused(f"{where}: {at} has no column {column}")
        fk = cat.fk(at, column)
        if fk is None:
            raise Refused(f"{where}: {at}.{column} is no foreign key, so the path stops there")
        hops.append(Hop(at, fk.columns, fk.parent, fk.parent_columns))
        at = fk.parent
    if at != end:
        raise Refused(f"{where}: the path ends at {at}, not at {end}")
    return tuple(hops)


def _anonymize(cat: Catalog, where: str, table: str, rules: dict[str, Any]) -> dict[str, Any]:
    t = cat.tables[table]
    for column, rule in rules.items():
        if column not in t.columns:
            raise Refused(f"{where}: {table} has no column {column}")
        if column in t.primary_key:
            raise Refused(f"{where}: {table}.{column} is the primary key; it is never rewritten")
        if rule is None and column in t.not_null:
            raise Refused(f"{where}: {table}.{column} is NOT NULL: anonymize it with a value or tombstone")
        if any(f.table == table and column in f.columns for f in cat.foreign_keys) and rule is not None:
            raise Refused(f"{where}: {table}.{column} is a foreign key: anonymize it with null, or delete the rows")
        unique = next((u for u in t.uniques if column in u.columns), None)
        if unique is not None and rule not in ("tombstone", None):
            kind = " (an expression index)" if unique.expression else " (a partial index)" if unique.partial else ""
            raise Refused(
                f"{where}: {table}.{column} is under the unique index {unique.name}{kind}: a fixed value "
                f"{rule!r} would repeat from the second person on; only a tombstone keeps it unique"
            )
    return rules


def check(data: dict[str, Any], cat: Catalog) -> Compiled:
    """The dataset resolved against the catalog, or Refused naming the entry."""
    person = data["person"]
    pt = person["table"]
    ct = data["communities"]["table"]
    for where, table in (("person.table", pt), ("communities.table", ct)):
        _table(cat, where, table)
        if len(cat.tables[table].primary_key) != 1:
            raise Refused(f"{where}: {table} has no single-column primary key")
    if person["key"] not in cat.tables[pt].columns:
        raise Refused(f"person.key: {pt} has no column {person['key']}")
    if data["communities"]["name"] not in cat.tables[ct].columns:
        raise Refused(f"communities.name: {ct} has no column {data['communities']['name']}")
    m = data["communities"]["memberships"]
    _table(cat, "communities.memberships.table", m["table"])
    _path(cat, "communities.memberships.person", m["table"], m["person"], pt)
    _path(cat, "communities.memberships.community", m["table"], m["community"], ct)
    if m["role"] not in cat.tables[m["table"]].columns:
        raise Refused(f"communities.memberships.role: {m['table']} has no column {m['role']}")
    person_action = person.get("action") or {}
    if person_action == "delete" or not isinstance(person_action, dict):
        raise Refused(
            "person.action: the person's own row is anonymized, never deleted (every table of theirs references "
            "it): write action: {anonymize: {...}}"
        )
    person_anonymize = _anonymize(cat, "person.action", pt, person_action.get("anonymize", {}))
    identities = dict(data.get("identities") or {})
    for name, column in identities.items():
        if column not in cat.tables[pt].columns:
            raise Refused(f"identities.{name}: {pt} has no column {column}")
    ppk = cat.tables[pt].primary_key[0]
    entries = [_entry(cat, name, spec, pt, ppk, ct, identities) for name, spec in data["tables"].items()]
    named = {e.table: e for e in entries}
    for fixed, where in ((pt, "person.table"), (m["table"], "communities.memberships")):
        if fixed in named:
            raise Refused(f"tables.{fixed}: {fixed} is the file's {where}; it is not named again under tables")
    _cascades(cat, entries, named, m["table"])
    _complete(cat, pt, named, m["table"])
    ordered = _ordered(entries, cat)
    types = {t: dict(cat.tables[t].columns) for t in (pt, ct, m["table"], *named)}
    if ct in named and named[ct].community is not None:
        raise Refused(f"tables.{ct}: the communities table's rows are no community's: leave out community")
    return Compiled(
        data=data,
        person_table=pt,
        person_pk=ppk,
        person_pk_type=cat.tables[pt].columns[ppk],
        person_key=person["key"],
        person_anonymize=person_anonymize,
        identities=identities,
        community_table=ct,
        community_pk=cat.tables[ct].primary_key[0],
        community_pk_type=cat.tables[ct].columns[cat.tables[ct].primary_key[0]],
        community_name=data["communities"]["name"],
        memberships=m,
        entries=ordered,
        types=types,
        partitioned=frozenset(t for t in types if cat.tables[t].partitioned),
    )


def _table(cat: Catalog, where: str, table: str) -> None:
    if table in cat.partitions:
        raise Refused(f"{where}: {table} is a partition of {cat.partitions[table]}: name the partitioned table")
    if table not in cat.tables:
        raise Refused(f"{where}: no table {table} in the application's database")


def _entry(
    cat: Catalog, name: str, spec: dict[str, Any], pt: str, ppk: str, ct: str, identities: dict[str, str]
) -> Entry:
    where = f"tables.{name}"
    _table(cat, where, name)
    if not cat.tables[name].primary_key:
        raise Refused(f"{where}: {name} has no primary key, so its rows cannot be named one by one")
    raw = spec["person"]
    person: tuple[Hop, ...] | Identity
    if isinstance(raw, dict):
        if raw["identity"] not in identities:
            raise Refused(f"{where}.person: no identity {raw['identity']!r} is declared under identities")
        if raw["column"] not in cat.tables[name].columns:
            raise Refused(f"{where}.person: {name} has no column {raw['column']}")
        person = Identity(raw["identity"], raw["column"], identities[raw["identity"]])
    else:
        person = _path(cat, f"{where}.person", name, raw, pt)
        if person[-1].parent_columns != (ppk,):
            raise Refused(f"{where}.person: the path reaches {pt} by other columns than its primary key {ppk}")
    community = _path(cat, f"{where}.community", name, spec["community"], ct) if "community" in spec else None
    action = spec["action"]
    if action == "keep" and not str(spec.get("reason", "")).strip():
        raise Refused(f"{where}: keep needs a reason (shown to the approver and printed in the proof)")
    if action != "keep" and "reason" in spec:
        raise Refused(f"{where}.reason: only a table the file keeps gives a reason")
    kind = action if isinstance(action, str) else "anonymize"
    return Entry(
        table=name,
        pk=tuple(cat.tables[name].primary_key),
        person=person,
        community=community,
        action=kind,
        anonymize=_anonymize(cat, f"{where}.action", name, action["anonymize"]) if kind == "anonymize" else {},
        reason=str(spec.get("reason", "")).strip(),
        stage=spec.get("stage", "purge_db"),
    )


def _cascades(cat: Catalog, entries: list[Entry], named: dict[str, Entry], memberships: str) -> None:
    """A delete's cascade reaches only rows the file deletes too, never a row of a kept table; a
    table's own rows never cascade through itself (another person's answer to the person's row)."""
    for e in entries:
        if e.action != "delete":
            continue
        for fk in cat.children(e.table):
            if fk.on_delete != "c":
                continue
            if fk.table == e.table:
                raise Refused(
                    f"{e.where}: {fk.said()} is ON DELETE CASCADE: deleting the person's rows would delete other "
                    f"people's rows that answer them; anonymize {e.table}, or make the key ON DELETE SET NULL"
                )
            child = named.get(fk.table)
            if child is None and fk.table != memberships:
                raise Refused(
                    f"{e.where}: deleting its rows cascades into {fk.table} ({fk.table}.{fk.column}), "
                    "which the file does not name"
                )
            if child is not None and child.action != "delete":
                raise Refused(
                    f"{e.where}: deleting its rows cascades into {fk.table} ({fk.said()}), which the file says "
                    f"to {child.action}"
                )


def _complete(cat: Catalog, pt: str, named: dict[str, Entry], memberships: str) -> None:
    """Every table whose rows reach the person's table through foreign keys is named (or is the
    memberships table): refused otherwise, naming the table and the keys it reaches the person by."""
    for path in reaching(cat, pt):
        tip = path[0].table
        if tip in named or tip == memberships:
            continue
        how = " then ".join(f.said() for f in path)
        hops = "directly" if len(path) == 1 else f"{len(path)} keys away"
        raise Refused(
            f"tables.{tip}: {tip} reaches {pt} {hops} ({how}) and the file does not name it: say delete, "
            "anonymize, or keep with a reason"
        )


def _ordered(entries: list[Entry], cat: Catalog) -> list[Entry]:
    """Children before parents, from the catalog's foreign keys among the named tables; a cycle is refused."""
    names = {e.table for e in entries}
    after: dict[str, set[str]] = {e.table: set() for e in entries}  # table -> the tables deleted before it
    for fk in cat.foreign_keys:
        if fk.table in names and fk.parent in names and fk.table != fk.parent:
            after[fk.parent].add(fk.table)
    order: list[str] = []
    while after:
        ready = sorted(t for t, before in after.items() if not before - set(order))
        if not ready:
            raise Refused(f"tables: {', '.join(sorted(after))} reference each other in a cycle; no delete order exists")
        order += ready
        for t in ready:
            del after[t]
    return sorted(entries, key=lambda e: order.index(e.table))


# --- SQL ------------------------------------------------------------------------------------------


def joins(hops: tuple[Hop, ...], prefix: str, *, outer: bool = False, start: str = "t0") -> tuple[str, list[str]]:
    """Joins following a path from `start`, and the expressions of its last key's columns."""
    out, alias = [], start
    kind = "LEFT JOIN" if outer else "JOIN"
    for i, hop in enumerate(hops[:-1], start=1):
        nxt = f"{prefix}{i}"
        on = " AND ".join(
            f"{nxt}.{_q(pc)} = {alias}.{_q(c)}" for c, pc in zip(hop.columns, hop.parent_columns, strict=True)
        )
        out.append(f"{kind} {_q(hop.parent)} {nxt} ON {on}")
        alias = nxt
    return " ".join(out), [f"{alias}.{_q(c)}" for c in hops[-1].columns]


def person_match(e: Entry, person: str, identity: Any = None) -> tuple[str, str]:
    """(joins, condition): the entry's rows that are the person's. `identity(name)` names the SQL
    value of an identity (plpgsql variables here, parameters in `complete`)."""
    if isinstance(e.person, Identity):
        value = identity(e.person.name) if identity else f"v_identity_{e.person.name}"
        return "", f"t0.{_q(e.person.column)} = {value}"
    pj, pe = joins(e.person, "p")
    return pj, f"{pe[0]} = {person}"


def mine(e: Entry, scope: str, *, person: str = "v_person", columns: str = "") -> str:
    """The person's rows of an entry: `scope` "community" (in v_community), "own" (in no community:
    the table has none, or its path names none), or "all"."""
    pj, pc = person_match(e, person)
    where = [pc]
    cj = ""
    if e.community is not None and scope != "all":
        cj, ce = joins(e.community, "c", outer=True)
        where.append(f"{ce[0]} = v_community" if scope == "community" else f"{ce[0]} IS NULL")
    select = columns or ", ".join(f"t0.{_q(k)}" for k in e.pk)
    return f"SELECT {select} FROM {_q(e.table)} t0 {pj} {cj} WHERE {' AND '.join(where)}"


def _pk(e: Entry) -> str:
    return "(" + ", ".join(_q(k) for k in e.pk) + ")"


def tombstone(pk: tuple[str, ...] | list[str], alias: str = "") -> str:
    at = f"{alias}." if alias else ""
    return "'deleted-' || concat_ws('-', " + ", ".join(f"{at}{_q(k)}::text" for k in pk) + ")"


def value(rule: Any, kind: str, pk: tuple[str, ...] | list[str], alias: str = "") -> str:
    """The SQL of an anonymized value: NULL, a tombstone, or the file's value cast to the column's type."""
    if rule is None:
        return "NULL"
    if rule == "tombstone":
        return tombstone(pk, alias)
    return f"CAST({literal(str(rule))} AS {kind})"


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _set(rules: dict[str, Any], types: dict[str, str], pk: tuple[str, ...] | list[str]) -> str:
    return ", ".join(f"{_q(c)} = {value(r, types[c], pk)}" for c, r in rules.items())


def _identity_vars(c: Compiled) -> tuple[str, str]:
    """plpgsql declarations and the statement reading the person's identities (before anything changes)."""
    if not c.identities:
        return "", ""
    pt, ppk = _q(c.person_table), _q(c.person_pk)
    decl = "".join(f"    v_identity_{n} {pt}.{_q(col)}%TYPE;\n" for n, col in c.identities.items())
    names = ", ".join(f"v_identity_{n}" for n in c.identities)
    cols = ", ".join(_q(col) for col in c.identities.values())
    return decl, f"SELECT {cols} INTO {names} FROM {pt} WHERE {ppk} = v_person;"


# Of the schema `receiver` this module installs (2: receiver_state, receiver_applied; 3: the version triggers
# once per statement, so a receiver refuses to serve an install that still runs them once per row).
SCHEMA_VERSION = 3
# The receiver's state, in the application's own database so a restore takes it back with the data: an
# incarnation made once at the first install, and a counter of the operations newly applied (a sequence:
# never rolled back, so it only moves on; a restore of a dump sets it back to what the dump held). Each
# effect's evidence carries its number; a receiver that reports less than the back-office holds evidence
# of went back in time.
STATE_SQL = (
    """CREATE TABLE IF NOT EXISTS receiver.receiver_state (one boolean PRIMARY KEY DEFAULT true CHECK (one),
            incarnation uuid NOT NULL, schema_version integer NOT NULL)""",
    "CREATE SEQUENCE IF NOT EXISTS receiver.receiver_applied MINVALUE 0 START 1",
    f"""INSERT INTO receiver.receiver_state (one, incarnation, schema_version) VALUES (true, gen_random_uuid(),
            {SCHEMA_VERSION}) ON CONFLICT (one) DO UPDATE SET schema_version = EXCLUDED.schema_version""",
)


def install_sql(c: Compiled) -> str:
    pt, ppk, ct, cpk = _q(c.person_table), _q(c.person_pk), _q(c.community_table), _q(c.community_pk)
    m = c.memberships
    mt, mp, mc, mr = _q(m["table"]), _q(m["person"]), _q(m["community"]), _q(m["role"])
    dataset, prefix = c.dataset, c.data["prefix"]
    out = [
        "CREATE SCHEMA IF NOT EXISTS receiver",
        """CREATE TABLE IF NOT EXISTS receiver.receiver_fences (request_id uuid PRIMARY KEY, generation bigint NOT NULL,
            min_epoch bigint NOT NULL DEFAULT 0, epoch_raised_at timestamptz)""",
        """CREATE TABLE IF NOT EXISTS receiver.receiver_operations (operation_id uuid PRIMARY KEY,
            request_id uuid NOT NULL, action text NOT NULL, community_id uuid, generation bigint NOT NULL,
            executor text NOT NULL,
            "grant" text NOT NULL, evidence jsonb NOT NULL, applied_at timestamptz NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS receiver_operations_applied ON receiver.receiver_operations (applied_at)",
        """CREATE TABLE IF NOT EXISTS receiver.receiver_people (person_key text PRIMARY KEY, person_pk text NOT NULL,
            gated_at timestamptz)""",
        """CREATE TABLE IF NOT EXISTS receiver.receiver_versions (person_pk text NOT NULL, community_id uuid NOT NULL,
            community_pk text NOT NULL, version bigint NOT NULL DEFAULT 1, PRIMARY KEY (person_pk, community_id))""",
        # When the installed rules change, every version moves on (an approval made under the old rules
        # expects an older version) and says from which rules version, at which version.
        "ALTER TABLE receiver.receiver_versions ADD COLUMN IF NOT EXISTS rules_from integer",
        "ALTER TABLE receiver.receiver_versions ADD COLUMN IF NOT EXISTS rules_moved_at bigint",
        "CREATE INDEX IF NOT EXISTS receiver_versions_pk ON receiver.receiver_versions (person_pk, community_pk)",
        """CREATE TABLE IF NOT EXISTS receiver.receiver_call_nonces (nonce varchar(64) PRIMARY KEY,
            kept_until timestamptz NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS receiver_call_nonces_kept ON receiver.receiver_call_nonces (kept_until)",
        """CREATE TABLE IF NOT EXISTS receiver.receiver_installed (dataset text PRIMARY KEY, version integer NOT NULL,
            digest text NOT NULL, installed_at timestamptz NOT NULL)""",
        # What this database has applied, so a restore of it from a backup can be told (`STATE_SQL`).
        *STATE_SQL,
        f"""UPDATE receiver.receiver_versions v SET version = v.version + 1, rules_from = i.version,
            rules_moved_at = v.version + 1
            FROM receiver.receiver_installed i
            WHERE i.dataset = {literal(dataset)} AND i.digest <> {literal(digest(c.data))}""",
    ]
    out += _triggers(c)
    decl, read_identities = _identity_vars(c)
    # Every community the person's rows are in: memberships (current or former), and every community
    # a named table puts a row of theirs in (a community they left, or never joined).
    places = [f"SELECT m.{mc}::text FROM {mt} m WHERE m.{mp} = v_person"]
    for e in c.entries:
        if e.community is None:
            continue
        pj, pc = person_match(e, "v_person")
        cj, ce = joins(e.community, "c")
        places.append(f"SELECT {ce[0]}::text FROM {_q(e.table)} t0 {pj} {cj} WHERE {pc} AND {ce[0]} IS NOT NULL")
    out.append(
        f"""CREATE OR REPLACE FUNCTION receiver.places(v_person {pt}.{ppk}%TYPE) RETURNS TABLE (out_place text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
{decl}BEGIN
    {read_identities}
    RETURN QUERY {" UNION ".join(places)};
END $$"""
    )
    counts = {
        key: " + ".join(f"(SELECT count(*) FROM ({mine(e, key[1])}) r)" for e in c.entries if _in(e, *key)) or "0"
        for key in (("purge_db", "community"), ("purge_agents", "community"), ("purge_db", "own"))
    }
    kept = {
        scope: " || ".join(
            f"jsonb_build_object({literal(e.table)}, (SELECT count(*) FROM ({mine(e, scope)}) r))"
            for e in c.entries
            if e.action == "keep" and (scope == "own" or e.community is not None)
        )
        or "'{}'::jsonb"
        for scope in ("community", "own")
    }
    own = own_records_id(dataset)
    out.append(
        f"""CREATE OR REPLACE FUNCTION receiver.preview(p_handle text)
RETURNS TABLE (community_id uuid, name text, role text, n_rows bigint, n_agents bigint, kept jsonb, version bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_person {pt}.{ppk}%TYPE;
    v_community {ct}.{cpk}%TYPE;
{decl}    r record;
BEGIN
    SELECT p.person_pk::{c.person_pk_type} INTO v_person FROM receiver.receiver_people p WHERE p.person_key = p_handle;
    IF NOT FOUND THEN
        -- A target is the dataset's prefix and the person's key.
        SELECT u.{ppk} INTO v_person FROM {pt} u
        WHERE left(p_handle, {len(prefix)}) = {literal(prefix)}
          AND u.{_q(c.person_key)} = substr(p_handle, {len(prefix) + 1});
        IF NOT FOUND THEN RETURN; END IF;
        INSERT INTO receiver.receiver_people (person_key, person_pk) VALUES (p_handle, v_person::text)
        ON CONFLICT DO NOTHING;
    END IF;
    {read_identities}
    FOR r IN SELECT k.{cpk} AS cid, k.{_q(c.community_name)}::text AS name,
                    coalesce((SELECT m.{mr}::text FROM {mt} m WHERE m.{mp} = v_person AND m.{mc} = k.{cpk} LIMIT 1),
                             '{NOT_A_MEMBER}') AS role
             FROM {ct} k WHERE k.{cpk}::text IN (SELECT x.out_place FROM receiver.places(v_person) x)
             ORDER BY k.{cpk} LOOP
        v_community := r.cid;
        community_id := {place_id(c, "r.cid::text")};
        INSERT INTO receiver.receiver_versions (person_pk, community_id, community_pk)
        VALUES (v_person::text, community_id, r.cid::text) ON CONFLICT DO NOTHING;
        name := r.name;
        role := r.role;
        n_rows := {counts[("purge_db", "community")]};
        n_agents := {counts[("purge_agents", "community")]};
        kept := {kept["community"]};
        SELECT v.version INTO version FROM receiver.receiver_versions v
        WHERE v.person_pk = v_person::text AND v.community_id = preview.community_id;
        RETURN NEXT;
    END LOOP;
    -- Their own records, always last: the tables in no community, and their own row.
    community_id := {literal(own)}::uuid;
    INSERT INTO receiver.receiver_versions (person_pk, community_id, community_pk)
    VALUES (v_person::text, community_id, '{OWN}') ON CONFLICT DO NOTHING;
    name := 'their own records (in no community)';
    role := '{OWN_RECORDS_ROLE}';
    n_rows := {counts[("purge_db", "own")]};
    n_agents := 0;
    kept := {kept["own"]};
    SELECT v.version INTO version FROM receiver.receiver_versions v
    WHERE v.person_pk = v_person::text AND v.community_id = preview.community_id;
    RETURN NEXT;
END $$"""
    )
    out.append(_apply(c))
    out.append(
        "INSERT INTO receiver.receiver_installed (dataset, version, digest, installed_at) "
        f"VALUES ({literal(dataset)}, {c.version}, {literal(digest(c.data))}, now()) "
        "ON CONFLICT (dataset) DO UPDATE SET version = EXCLUDED.version, digest = EXCLUDED.digest, "
        "installed_at = EXCLUDED.installed_at"
    )
    return ";\n".join(out) + ";\n"


def _in(e: Entry, stage: str | None, scope: str) -> bool:
    """Whether an entry changes rows in this stage and scope: a community's stages take the tables
    with a community (each its own stage); their own records take every table, whatever its stage
    (rows in no community)."""
    if e.action == "keep":
        return False
    if scope == "own":
        return True
    return e.community is not None and (stage is None or e.stage == stage)


def _triggers(c: Compiled) -> list[str]:
    """The version triggers of every table that changes: each statement's rows, old and new, grouped by
    their person and community (or their own records), move that version on by as many rows, once per
    statement (transition tables: `FOR EACH STATEMENT`, one trigger per event, as PostgreSQL requires).
    The rows' person and community are read when the statement ends, as a row trigger read them.

    A partitioned table keeps a row trigger: PostgreSQL fires a statement trigger only for the table a
    statement names, so a write straight into a partition (one added later included) would not move
    the version; a row trigger on the partitioned table is cloned onto every partition."""
    m = c.memberships
    member = Hop(m["table"], (m["person"],), c.person_table, (c.person_pk,))
    place = Hop(m["table"], (m["community"],), c.community_table, (c.community_pk,))
    versioned: list[tuple[str, tuple[Hop, ...] | Identity, tuple[Hop, ...] | None]] = [
        (m["table"], (member,), (place,))
    ]
    versioned += [(e.table, e.person, e.community) for e in c.entries if e.action != "keep"]
    out = []
    for table, person, community in versioned:
        if isinstance(person, Identity):
            pj = ""
            pe = (
                f"(SELECT u.{_q(c.person_pk)} FROM {_q(c.person_table)} u "
                f"WHERE u.{_q(person.person_column)} = t0.{_q(person.column)} LIMIT 1)"
            )
        else:
            pj, pes = joins(person, "p")
            pe = pes[0]
        if community is None:
            cj, ce = "", f"'{OWN}'"
        else:
            cj, ces = joins(community, "c", outer=True)
            ce = f"coalesce({ces[0]}::text, '{OWN}')"

        def bump(rows: str, pj: str = pj, pe: str = pe, cj: str = cj, ce: str = ce) -> str:
            return (
                "UPDATE receiver.receiver_versions v SET version = v.version + x.n "
                f"FROM (SELECT {pe}::text AS p, {ce} AS c, count(*) AS n FROM {rows} t0 {pj} {cj} GROUP BY 1, 2) x "
                "WHERE v.person_pk = x.p AND v.community_pk = x.c;"
            )

        fn = f"receiver.{_q('version_' + table)}"
        row = table in c.partitioned
        old, new = ("(SELECT OLD.*)", "(SELECT NEW.*)") if row else ("old_rows", "new_rows")
        out.append(
            f"""CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN {bump(old)} END IF;
    IF TG_OP <> 'DELETE' THEN {bump(new)} END IF;
    RETURN NULL;
END $$"""
        )
        out += [f"DROP TRIGGER IF EXISTS {name} ON {_q(table)}" for name in TRIGGERS]
        if row:
            out.append(
                f"CREATE TRIGGER receiver_version AFTER INSERT OR UPDATE OR DELETE ON {_q(table)} "
                f"FOR EACH ROW EXECUTE FUNCTION {fn}()"
            )
            continue
        for event, transition in (
            ("insert", "NEW TABLE AS new_rows"),
            ("update", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
            ("delete", "OLD TABLE AS old_rows"),
        ):
            out.append(
                f"CREATE TRIGGER receiver_version_{event} AFTER {event.upper()} ON {_q(table)} "
                f"REFERENCING {transition} FOR EACH STATEMENT EXECUTE FUNCTION {fn}()"
            )
    return out


def _changes(c: Compiled, scope: str, stage: str | None) -> str:
    """Each named table's change in this scope, children first, counted into v_tables."""
    body = []
    for e in c.entries:
        if not _in(e, stage, scope):
            continue
        rows = mine(e, scope)
        if e.action == "delete":
            change = f"WITH d AS (DELETE FROM {_q(e.table)} WHERE {_pk(e)} IN ({rows}) RETURNING 1)"
        else:
            change = (
                f"WITH d AS (UPDATE {_q(e.table)} SET {_set(e.anonymize, c.types[e.table], e.pk)} "
                f"WHERE {_pk(e)} IN ({rows}) RETURNING 1)"
            )
        left = f"(SELECT count(*) FROM ({rows}) r)" if e.action == "delete" else "0"
        body.append(
            f"""        v_table := {literal(e.table)};
        {change}
        SELECT (SELECT count(*) FROM ({rows}) r), (SELECT count(*) FROM d) INTO v_before, v_changed;
        SELECT {left} INTO v_left;
        v_tables := v_tables || jsonb_build_object({literal(e.table)}, jsonb_build_object('action', '{e.action}',
            'before', v_before, 'changed', v_changed, 'remaining', v_left));
        v_total_before := v_total_before + v_before;
        v_total_changed := v_total_changed + v_changed;
        v_total_left := v_total_left + v_left;"""
        )
    for e in c.entries:
        if e.action == "keep" and stage in (None, "purge_db") and (scope == "own" or e.community is not None):
            body.append(
                f"""        v_kept := v_kept || jsonb_build_object({literal(e.table)}, jsonb_build_object(
            'rows', (SELECT count(*) FROM ({mine(e, scope)}) r), 'reason', {literal(e.reason)}));"""
            )
    return "\n".join(body)


def _apply(c: Compiled) -> str:
    pt, ppk, ct, cpk = _q(c.person_table), _q(c.person_pk), _q(c.community_table), _q(c.community_pk)
    m = c.memberships
    mt, mp, mc = _q(m["table"]), _q(m["person"]), _q(m["community"])
    decl, read_identities = _identity_vars(c)
    agents = " + ".join(
        f"(SELECT count(*) FROM ({mine(e, 'community')}) r)" for e in c.entries if _in(e, "purge_agents", "community")
    )
    person_set = _set(c.person_anonymize, c.types[c.person_table], (c.person_pk,))
    own_person = f"UPDATE {pt} SET {person_set} WHERE {ppk} = v_person;" if person_set else ""
    return f"""CREATE OR REPLACE FUNCTION receiver.apply(
    p_operation uuid, p_request uuid, p_generation bigint, p_epoch bigint, p_action text, p_community uuid,
    p_handle text, p_expected_version bigint, p_expected_versions jsonb, p_executor text, p_grant text,
    p_now timestamptz, p_applied_at text
) RETURNS TABLE (out_recorded boolean, out_evidence jsonb, out_grant text, out_applied_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_fenced bigint;
    v_min_epoch bigint;
    v_raised_at timestamptz;
    v_done receiver.receiver_operations%ROWTYPE;
    v_person {pt}.{ppk}%TYPE;
    v_community {ct}.{cpk}%TYPE;
    v_place text;
    v_version bigint;
    v_rules_from integer;
    v_rules_moved_at bigint;
    v_after bigint;
    v_before bigint;
    v_changed bigint;
    v_left bigint;
    v_table text;
    v_agents bigint := 0;
    v_total_before bigint := 0;
    v_total_changed bigint := 0;
    v_total_left bigint := 0;
    v_tables jsonb := '{{}}'::jsonb;
    v_kept jsonb := '{{}}'::jsonb;
    v_seen record;
{decl}    v_evidence jsonb := jsonb_build_object('applied_at', p_applied_at, 'generation', p_generation,
        'executor', p_executor, 'dataset', {literal(c.dataset)}, 'dataset_version', {c.version},
        'dataset_digest', {literal(digest(c.data))});
BEGIN
    INSERT INTO receiver.receiver_fences AS f (request_id, generation, min_epoch) VALUES (p_request, p_generation, 0)
    ON CONFLICT (request_id) DO UPDATE SET generation = GREATEST(f.generation, EXCLUDED.generation)
    RETURNING f.generation, f.min_epoch, f.epoch_raised_at INTO v_fenced, v_min_epoch, v_raised_at;
    IF v_fenced > p_generation THEN
        RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'stale',
            DETAIL = jsonb_build_object('fenced', v_fenced)::text;
    END IF;
    IF p_epoch < v_min_epoch THEN
        RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'revoked',
            DETAIL = jsonb_build_object('min_epoch', v_min_epoch, 'raised_at', v_raised_at)::text;
    END IF;
    SELECT * INTO v_done FROM receiver.receiver_operations o WHERE o.operation_id = p_operation;
    IF FOUND THEN
        RETURN QUERY SELECT true, v_done.evidence, v_done."grant", v_done.applied_at;
        RETURN;
    END IF;
    SELECT p.person_pk::{c.person_pk_type} INTO v_person FROM receiver.receiver_people p WHERE p.person_key = p_handle;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'not_a_person', DETAIL = '{{}}';
    END IF;
    -- The person's own row, locked: no new row of theirs can be written behind a foreign key until this commits.
    PERFORM 1 FROM {pt} WHERE {ppk} = v_person FOR UPDATE;
    {read_identities}
    IF p_community IS NULL THEN
        -- The gate: every community the approval saw is where it was (its data version, its rules),
        -- and the person has rows in no community the approval did not see; nothing is changed yet.
        FOR v_seen IN SELECT e.key AS cid, e.value::bigint AS expected, v.version, v.rules_from, v.rules_moved_at
                      FROM jsonb_each_text(coalesce(p_expected_versions, '{{}}'::jsonb)) e
                      LEFT JOIN receiver.receiver_versions v
                        ON v.person_pk = v_person::text AND v.community_id = e.key::uuid LOOP
            IF v_seen.version IS NULL THEN
                RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'not_in_inventory',
                    DETAIL = jsonb_build_object('community', v_seen.cid)::text;
            END IF;
            IF v_seen.version IS DISTINCT FROM v_seen.expected THEN
                IF v_seen.rules_moved_at > v_seen.expected AND v_seen.rules_moved_at <= v_seen.version THEN
                    RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'rules_changed',
                        DETAIL = jsonb_build_object('from', v_seen.rules_from, 'to', {c.version})::text;
                END IF;
                RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'source_changed',
                    DETAIL = jsonb_build_object('version', v_seen.version, 'expected', v_seen.expected,
                                                'community', v_seen.cid)::text;
            END IF;
        END LOOP;
        IF p_expected_versions IS NOT NULL THEN
            SELECT x.out_place INTO v_place FROM receiver.places(v_person) x
            WHERE NOT p_expected_versions ? {place_id(c, "x.out_place")}::text LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'source_changed',
                    DETAIL = jsonb_build_object('unseen', {place_id(c, "v_place")})::text;
            END IF;
        END IF;
        UPDATE receiver.receiver_people SET gated_at = coalesce(gated_at, p_now) WHERE person_key = p_handle;
        v_evidence := v_evidence || jsonb_build_object('gated', true,
            'communities_checked', (SELECT count(*) FROM jsonb_object_keys(coalesce(p_expected_versions, '{{}}'))));
    ELSE
        SELECT v.community_pk, v.version, v.rules_from, v.rules_moved_at
        INTO v_place, v_version, v_rules_from, v_rules_moved_at
        FROM receiver.receiver_versions v
        WHERE v.person_pk = v_person::text AND v.community_id = p_community FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'not_in_inventory', DETAIL = '{{}}';
        END IF;
        IF v_version IS DISTINCT FROM p_expected_version THEN
            IF v_rules_moved_at > p_expected_version AND v_rules_moved_at <= v_version THEN
                RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'rules_changed',
                    DETAIL = jsonb_build_object('from', v_rules_from, 'to', {c.version})::text;
            END IF;
            RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'source_changed',
                DETAIL = jsonb_build_object('version', v_version)::text;
        END IF;
        IF p_action NOT IN ('purge_db', 'purge_agents') OR (v_place = '{OWN}' AND p_action <> 'purge_db') THEN
            RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'no_action', DETAIL = '{{}}';
        END IF;
        IF v_place = '{OWN}' THEN
            -- Their own records, the last effect: every table in no community, then their own row.
{_changes(c, "own", None)}
            v_table := {literal(c.person_table)};
            {own_person}
            v_evidence := v_evidence || jsonb_build_object('own_records', true);
        ELSE
            v_community := v_place::{c.community_pk_type};
            IF p_action = 'purge_db' THEN
{_changes(c, "community", "purge_db")}
                v_agents := {agents or "0"};
                v_table := {literal(m["table"])};
                DELETE FROM {mt} WHERE {mp} = v_person AND {mc} = v_community;
            ELSE
{_changes(c, "community", "purge_agents")}
            END IF;
        END IF;
        UPDATE receiver.receiver_versions SET version = version + 1
        WHERE person_pk = v_person::text AND community_id = p_community RETURNING version INTO v_after;
        IF p_action = 'purge_db' THEN
            v_evidence := v_evidence || jsonb_build_object('rows_before', v_total_before,
                'rows_deleted', v_total_changed, 'rows_remaining', v_total_left,
                'agents', v_agents, 'has_agents', v_agents > 0);
        ELSE
            v_evidence := v_evidence || jsonb_build_object('agents_before', v_total_before,
                'agents_removed', v_total_changed, 'agents_remaining', v_total_left);
        END IF;
        v_evidence := v_evidence || jsonb_build_object('tables', v_tables, 'kept', v_kept,
            'version_before', p_expected_version, 'version_found', v_version, 'version_after', v_after);
    END IF;
    -- The fence and epoch this effect was applied under, and its number in this database (a replay above
    -- answered its first record: the counter moves only for an operation newly applied).
    v_evidence := v_evidence || jsonb_build_object('fence', v_fenced, 'min_epoch', v_min_epoch,
        'receiver_state', jsonb_build_object('incarnation', (SELECT s.incarnation FROM receiver.receiver_state s),
                                             'applied', nextval('receiver.receiver_applied')));
    INSERT INTO receiver.receiver_operations
        (operation_id, request_id, action, community_id, generation, executor, "grant", evidence, applied_at)
    VALUES (p_operation, p_request, p_action, p_community, p_generation, p_executor, p_grant, v_evidence, p_now);
    RETURN QUERY SELECT false, v_evidence, p_grant, p_now;
END $$"""
