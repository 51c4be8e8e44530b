"""A dataset file, checked against the application's catalog, and the SQL that installs the
receiver into that database (schema `receiver`).

`load` reads the YAML and checks it against `schema.json`; `check` resolves every path through the
catalog's foreign keys and refuses, naming the entry, what cannot be done safely: an unknown table
or column, a path that does not reach the person or a community, a table without a primary key, a
cascade into a table the file does not name, a cycle among the tables, an anonymization that would
break a NOT NULL or UNIQUE column. `install_sql` is then the receiver's own tables, one version
trigger per table (a person's data version in a community moves with every row of theirs written
there, by the application or by the receiver) and one plpgsql apply function for the dataset, so
the fence, the epoch, the expected version, the effect and the operation record commit in the
application's own transaction.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from receiver.dataset.catalog import Catalog

SCHEMA = json.loads((Path(__file__).parent / "schema.json").read_text())


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
        raise Refused(f"{path}: {where}: {errors[0].message}")
    return dict(data)


def digest(data: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Hop:
    table: str  # the table the column is on
    column: str
    parent: str  # the table it references
    parent_column: str


@dataclass(frozen=True)
class Entry:
    table: str
    pk: str
    person: list[Hop]
    community: list[Hop]
    action: str  # delete | anonymize
    anonymize: dict[str, Any]
    stage: str


@dataclass(frozen=True)
class Compiled:
    data: dict[str, Any]
    person_table: str
    person_pk: str
    person_pk_type: str
    person_key: str
    person_anonymize: dict[str, Any]
    community_table: str
    community_pk: str
    community_pk_type: str
    community_name: str
    memberships: dict[str, str]
    entries: list[Entry]  # in delete order: children before parents
    references: list[tuple[str, str]]  # every (table, column) referencing the person table


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _path(cat: Catalog, where: str, table: str, raw: Any, end: str) -> list[Hop]:
    columns = [raw] if isinstance(raw, str) else list(raw)
    hops: list[Hop] = []
    at = table
    for column in columns:
        if column not in cat.tables[at].columns:
            raise Refused(f"{where}: {at} has no column {column}")
        fk = cat.fk(at, column)
        if fk is None:
            raise Refused(f"{where}: {at}.{column} is no foreign key, so the path stops there")
        hops.append(Hop(at, column, fk.parent, fk.parent_column))
        at = fk.parent
    if at != end:
        raise Refused(f"{where}: the path ends at {at}, not at {end}")
    return hops


def _anonymize(cat: Catalog, where: str, table: str, rules: dict[str, Any]) -> dict[str, Any]:
    t = cat.tables[table]
    for column, rule in rules.items():
        if column not in t.columns:
            raise Refused(f"{where}: {table} has no column {column}")
        if rule is None and column in t.not_null:
            raise Refused(f"{where}: {table}.{column} is NOT NULL: anonymize it with a string or tombstone")
        if column in t.unique and rule != "tombstone":
            raise Refused(f"{where}: {table}.{column} is UNIQUE: only a tombstone keeps it unique")
        if column in t.primary_key:
            raise Refused(f"{where}: {table}.{column} is the primary key; it is never rewritten")
    return rules


def check(data: dict[str, Any], cat: Catalog) -> Compiled:
    """The dataset resolved against the catalog, or Refused naming the entry."""
    person = data["person"]
    pt = person["table"]
    for where, table in (("person.table", pt), ("communities.table", data["communities"]["table"])):
        if table not in cat.tables:
            raise Refused(f"{where}: no table {table} in the application's database")
    if person["key"] not in cat.tables[pt].columns:
        raise Refused(f"person.key: {pt} has no column {person['key']}")
    ct = data["communities"]["table"]
    for where, table in (("person.table", pt), ("communities.table", ct)):
        if len(cat.tables[table].primary_key) != 1:
            raise Refused(f"{where}: {table} has no single-column primary key")
    if data["communities"]["name"] not in cat.tables[ct].columns:
        raise Refused(f"communities.name: {ct} has no column {data['communities']['name']}")
    m = data["communities"]["memberships"]
    if m["table"] not in cat.tables:
        raise Refused(f"communities.memberships.table: no table {m['table']} in the application's database")
    _path(cat, "communities.memberships.person", m["table"], m["person"], pt)
    _path(cat, "communities.memberships.community", m["table"], m["community"], ct)
    if m["role"] not in cat.tables[m["table"]].columns:
        raise Refused(f"communities.memberships.role: {m['table']} has no column {m['role']}")
    person_action = person.get("action") or {}
    person_anonymize = _anonymize(cat, "person.action", pt, person_action.get("anonymize", {}))
    if person_action == "delete":
        raise Refused("person.action: the person's own row is anonymized, never deleted (every table references it)")
    entries = []
    for name, spec in data["tables"].items():
        where = f"tables.{name}"
        if name not in cat.tables:
            raise Refused(f"{where}: no table {name} in the application's database")
        if len(cat.tables[name].primary_key) != 1:
            raise Refused(f"{where}: {name} has no single-column primary key")
        action = spec["action"]
        anonymize = {} if action == "delete" else _anonymize(cat, f"{where}.action", name, action["anonymize"])
        entries.append(
            Entry(
                table=name,
                pk=cat.tables[name].primary_key[0],
                person=_path(cat, f"{where}.person", name, spec["person"], pt),
                community=_path(cat, f"{where}.community", name, spec["community"], ct),
                action="delete" if action == "delete" else "anonymize",
                anonymize=anonymize,
                stage=spec.get("stage", "purge_db"),
            )
        )
    named = set(data["tables"]) | {pt, ct, m["table"]}
    for e in entries:
        if e.action != "delete":
            continue
        for fk in cat.children(e.table):
            if fk.on_delete == "c" and fk.table not in named:
                raise Refused(
                    f"tables.{e.table}: deleting its rows cascades into {fk.table} ({fk.table}.{fk.column}), "
                    "which the file does not name"
                )
    return Compiled(
        data=data,
        person_table=pt,
        person_pk=cat.tables[pt].primary_key[0],
        person_pk_type=cat.tables[pt].columns[cat.tables[pt].primary_key[0]],
        person_key=person["key"],
        person_anonymize=person_anonymize,
        community_table=ct,
        community_pk=cat.tables[ct].primary_key[0],
        community_pk_type=cat.tables[ct].columns[cat.tables[ct].primary_key[0]],
        community_name=data["communities"]["name"],
        memberships=m,
        entries=_ordered(entries, cat),
        references=[(f.table, f.column) for f in cat.children(pt)],
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


def _joins(hops: list[Hop], prefix: str, pks: dict[str, str]) -> tuple[str, str]:
    """Joins following a path from t0, and the expression of its last column."""
    joins, alias = [], "t0"
    for i, hop in enumerate(hops[:-1], start=1):
        nxt = f"{prefix}{i}"
        joins.append(f"JOIN {_q(hop.parent)} {nxt} ON {nxt}.{_q(hop.parent_column)} = {alias}.{_q(hop.column)}")
        alias = nxt
    return " ".join(joins), f"{alias}.{_q(hops[-1].column)}"


def _mine(c: Compiled, e: Entry, pks: dict[str, str]) -> str:
    """The primary keys of the person's rows of this entry in the community (v_person, v_community)."""
    pj, pe = _joins(e.person, "p", pks)
    cj, ce = _joins(e.community, "c", pks)
    return f"SELECT t0.{_q(e.pk)} FROM {_q(e.table)} t0 {pj} {cj} WHERE {pe} = v_person AND {ce} = v_community"


def _set(rules: dict[str, Any], pk: str) -> str:
    parts = []
    for column, rule in rules.items():
        if rule is None:
            value = "NULL"
        elif rule == "tombstone":
            value = f"'deleted-' || {_q(pk)}::text"
        else:
            value = "'" + str(rule).replace("'", "''") + "'"
        parts.append(f"{_q(column)} = {value}")
    return ", ".join(parts)


def install_sql(c: Compiled) -> str:
    pks = {e.table: e.pk for e in c.entries}
    pt, ppk, ct, cpk = _q(c.person_table), _q(c.person_pk), _q(c.community_table), _q(c.community_pk)
    m = c.memberships
    mt, mp, mc, mr = _q(m["table"]), _q(m["person"]), _q(m["community"]), _q(m["role"])
    dataset, version, prefix = c.data["dataset"], int(c.data["version"]), c.data["prefix"]
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
        "CREATE INDEX IF NOT EXISTS receiver_versions_pk ON receiver.receiver_versions (person_pk, community_pk)",
        """CREATE TABLE IF NOT EXISTS receiver.receiver_call_nonces (nonce varchar(64) PRIMARY KEY,
            kept_until timestamptz NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS receiver_call_nonces_kept ON receiver.receiver_call_nonces (kept_until)",
        """CREATE TABLE IF NOT EXISTS receiver.receiver_installed (dataset text PRIMARY KEY, version integer NOT NULL,
            digest text NOT NULL, installed_at timestamptz NOT NULL)""",
    ]
    # One version trigger per table: the rows' person and community, old and new, get their version moved on.
    versioned = [(m["table"], [Hop(m["table"], m["person"], c.person_table, c.person_pk)],
                  [Hop(m["table"], m["community"], c.community_table, c.community_pk)])]  # fmt: skip
    versioned += [(e.table, e.person, e.community) for e in c.entries]
    for table, person, community in versioned:
        pj, pe = _joins(person, "p", pks)
        cj, ce = _joins(community, "c", pks)

        def bump(row: str, pj: str = pj, pe: str = pe, cj: str = cj, ce: str = ce) -> str:
            return (
                "UPDATE receiver.receiver_versions v SET version = v.version + 1 "
                f"FROM (SELECT {pe}::text AS p, {ce}::text AS c FROM (SELECT {row}.*) t0 {pj} {cj}) x "
                "WHERE v.person_pk = x.p AND v.community_pk = x.c;"
            )

        fn = f"receiver.{_q('version_' + table)}"
        out.append(
            f"""CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN {bump("OLD")} END IF;
    IF TG_OP <> 'DELETE' THEN {bump("NEW")} END IF;
    RETURN NULL;
END $$"""
        )
        out.append(f"DROP TRIGGER IF EXISTS receiver_version ON {_q(table)}")
        out.append(
            f"CREATE TRIGGER receiver_version AFTER INSERT OR UPDATE OR DELETE ON {_q(table)} "
            f"FOR EACH ROW EXECUTE FUNCTION {fn}()"
        )
    # The person's communities, enrolled (a version row each), with the counts a preview shows.
    counts = {
        stage: " + ".join(f"(SELECT count(*) FROM ({_mine(c, e, pks)}) r)" for e in c.entries if e.stage == stage)
        or "0"
        for stage in ("purge_db", "purge_agents")
    }
    out.append(
        f"""CREATE OR REPLACE FUNCTION receiver.preview(p_handle text)
RETURNS TABLE (community_id uuid, name text, role text, n_rows bigint, n_agents bigint, version bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_person {pt}.{ppk}%TYPE;
    v_community {ct}.{cpk}%TYPE;
    r record;
BEGIN
    SELECT p.person_pk::{c.person_pk_type} INTO v_person FROM receiver.receiver_people p WHERE p.person_key = p_handle;
    IF NOT FOUND THEN
        -- A target is the dataset's prefix and the person's key.
        SELECT u.{ppk} INTO v_person FROM {pt} u
        WHERE left(p_handle, {len(prefix)}) = '{prefix}' AND u.{_q(c.person_key)} = substr(p_handle, {len(prefix) + 1});
        IF NOT FOUND THEN RETURN; END IF;
        INSERT INTO receiver.receiver_people (person_key, person_pk) VALUES (p_handle, v_person::text)
        ON CONFLICT DO NOTHING;
    END IF;
    FOR r IN SELECT m.{mc} AS cid, m.{mr}::text AS role, k.{_q(c.community_name)}::text AS name
             FROM {mt} m JOIN {ct} k ON k.{cpk} = m.{mc} WHERE m.{mp} = v_person ORDER BY m.{mc} LOOP
        v_community := r.cid;
        INSERT INTO receiver.receiver_versions (person_pk, community_id, community_pk)
        VALUES (v_person::text, md5('{dataset}|' || r.cid::text)::uuid, r.cid::text) ON CONFLICT DO NOTHING;
        community_id := md5('{dataset}|' || r.cid::text)::uuid;
        name := r.name;
        role := r.role;
        n_rows := {counts["purge_db"]};
        n_agents := {counts["purge_agents"]};
        SELECT v.version INTO version FROM receiver.receiver_versions v
        WHERE v.person_pk = v_person::text AND v.community_id = md5('{dataset}|' || r.cid::text)::uuid;
        RETURN NEXT;
    END LOOP;
END $$"""
    )
    out.append(_apply(c, pks))
    out.append(
        "INSERT INTO receiver.receiver_installed (dataset, version, digest, installed_at) "
        f"VALUES ('{dataset}', {version}, '{digest(c.data)}', now()) "
        "ON CONFLICT (dataset) DO UPDATE SET version = EXCLUDED.version, digest = EXCLUDED.digest, "
        "installed_at = EXCLUDED.installed_at"
    )
    return ";\n".join(out) + ";\n"


def _apply(c: Compiled, pks: dict[str, str]) -> str:
    pt, ppk, ct, cpk = _q(c.person_table), _q(c.person_pk), _q(c.community_table), _q(c.community_pk)
    m = c.memberships
    mt, mp, mc = _q(m["table"]), _q(m["person"]), _q(m["community"])
    refs = (
        " || ".join(
            f"jsonb_build_object('{t}.{col}', (SELECT count(*) FROM {_q(t)} WHERE {_q(col)} = v_person))"
            for t, col in c.references
        )
        or "'{}'::jsonb"
    )
    steps = []
    for stage in ("purge_db", "purge_agents"):
        body = [f"    IF p_action = '{stage}' THEN"]
        for e in (e for e in c.entries if e.stage == stage):
            mine = _mine(c, e, pks)
            if e.action == "delete":
                change = f"WITH d AS (DELETE FROM {_q(e.table)} WHERE {_q(e.pk)} IN ({mine}) RETURNING 1)"
            else:
                change = (
                    f"WITH d AS (UPDATE {_q(e.table)} SET {_set(e.anonymize, e.pk)} "
                    f"WHERE {_q(e.pk)} IN ({mine}) RETURNING 1)"
                )
            body.append(
                f"""        {change}
        SELECT (SELECT count(*) FROM ({mine}) r), (SELECT count(*) FROM d) INTO v_before, v_changed;
        SELECT count(*) INTO v_left FROM ({mine}) r;
        v_tables := v_tables || jsonb_build_object('{e.table}', jsonb_build_object('action', '{e.action}',
            'before', v_before, 'changed', v_changed, 'remaining', v_left));
        v_total_before := v_total_before + v_before;
        v_total_changed := v_total_changed + v_changed;"""
            )
        if stage == "purge_db":
            agents = (
                " + ".join(
                    f"(SELECT count(*) FROM ({_mine(c, e, pks)}) r)" for e in c.entries if e.stage == "purge_agents"
                )
                or "0"
            )
            body.append(f"        v_agents := {agents};")
            body.append(f"        DELETE FROM {mt} WHERE {mp} = v_person AND {mc} = v_community;")
        steps.append("\n".join(body) + "\n    END IF;")
    remaining = {
        stage: " + ".join(
            f"(SELECT count(*) FROM ({_mine(c, e, pks)}) r)"
            for e in c.entries
            if e.stage == stage and e.action == "delete"
        )
        or "0"
        for stage in ("purge_db", "purge_agents")
    }
    person_set = _set(c.person_anonymize, c.person_pk)
    gate_anonymize = f"UPDATE {pt} SET {person_set} WHERE {ppk} = v_person;" if person_set else ""
    return f"""CREATE OR REPLACE FUNCTION receiver.apply(
    p_operation uuid, p_request uuid, p_generation bigint, p_epoch bigint, p_action text, p_community uuid,
    p_handle text, p_expected_version bigint, p_executor text, p_grant text, p_now timestamptz, p_applied_at text
) RETURNS TABLE (out_recorded boolean, out_evidence jsonb, out_grant text, out_applied_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_fenced bigint;
    v_min_epoch bigint;
    v_raised_at timestamptz;
    v_done receiver.receiver_operations%ROWTYPE;
    v_person {pt}.{ppk}%TYPE;
    v_community {ct}.{cpk}%TYPE;
    v_version bigint;
    v_after bigint;
    v_before bigint;
    v_changed bigint;
    v_left bigint;
    v_agents bigint := 0;
    v_total_before bigint := 0;
    v_total_changed bigint := 0;
    v_tables jsonb := '{{}}'::jsonb;
    v_evidence jsonb := jsonb_build_object('applied_at', p_applied_at, 'generation', p_generation,
        'executor', p_executor, 'dataset', '{c.data["dataset"]}', 'dataset_version', {int(c.data["version"])},
        'dataset_digest', '{digest(c.data)}');
BEGIN
    -- Bounded: a lock held elsewhere (by your application) for more than 5 s fails this transaction,
    -- which rolls back whole: nothing changed, and the next attempt looks the operation up first.
    PERFORM set_config('lock_timeout', '5s', true);
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
    IF p_community IS NULL THEN
        UPDATE receiver.receiver_people SET gated_at = coalesce(gated_at, p_now) WHERE person_key = p_handle;
        {gate_anonymize}
        v_evidence := v_evidence || jsonb_build_object('gated', true,
            'memberships', (SELECT count(*) FROM receiver.receiver_versions WHERE person_pk = v_person::text));
    ELSE
        SELECT v.community_pk::{c.community_pk_type}, v.version INTO v_community, v_version
        FROM receiver.receiver_versions v
        WHERE v.person_pk = v_person::text AND v.community_id = p_community FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'not_in_inventory', DETAIL = '{{}}';
        END IF;
        IF v_version IS DISTINCT FROM p_expected_version THEN
            RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'source_changed',
                DETAIL = jsonb_build_object('version', v_version)::text;
        END IF;
{chr(10).join(steps)}
        IF p_action NOT IN ('purge_db', 'purge_agents') THEN
            RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'no_action', DETAIL = '{{}}';
        END IF;
        UPDATE receiver.receiver_versions SET version = version + 1
        WHERE person_pk = v_person::text AND community_id = p_community RETURNING version INTO v_after;
        IF p_action = 'purge_db' THEN
            v_evidence := v_evidence || jsonb_build_object('rows_before', v_total_before,
                'rows_deleted', v_total_changed, 'rows_remaining', {remaining["purge_db"]},
                'agents', v_agents, 'has_agents', v_agents > 0);
        ELSE
            v_evidence := v_evidence || jsonb_build_object('agents_before', v_total_before,
                'agents_removed', v_total_changed, 'agents_remaining', {remaining["purge_agents"]});
        END IF;
        v_evidence := v_evidence || jsonb_build_object('tables', v_tables, 'version_before', p_expected_version,
            'version_found', v_version, 'version_after', v_after);
    END IF;
    -- No leftovers: every foreign key into the person's table, counted now (anonymized tables keep theirs);
    -- and the fence and epoch this effect was applied under.
    v_evidence := v_evidence || jsonb_build_object('references_remaining', {refs}, 'fence', v_fenced,
        'min_epoch', v_min_epoch);
    INSERT INTO receiver.receiver_operations
        (operation_id, request_id, action, community_id, generation, executor, "grant", evidence, applied_at)
    VALUES (p_operation, p_request, p_action, p_community, p_generation, p_executor, p_grant, v_evidence, p_now);
    RETURN QUERY SELECT false, v_evidence, p_grant, p_now;
END $$"""
