"""The application connects as a role that owns no table and is no superuser, and the database
refuses it every rewrite of the record: completed stage history, finished attempts, lease events
and decisions are never rewritten, deleted (but inside the retention functions: see
test_records_guard_themselves.py) or truncated, and no trigger can be switched off. The
back-office itself runs as that role."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from deletions.models import DeletionRequest
from tests.conftest import ROOT, manage_argv, submit_and_approve, subprocess_env

pytestmark = pytest.mark.django_db(transaction=True)

ROLE = settings.DATABASE_APP_ROLE


def as_role() -> psycopg.Connection[Any]:
    """A connection to the test database as the application's role, autocommit."""
    connection.ensure_connection()
    params = {**connection.get_connection_params(), "user": ROLE, "autocommit": True}
    params.pop("password", None)  # the test servers trust local connections
    params.pop("prepare_threshold", None)
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**params)


def role_url() -> str:
    url = subprocess_env()["DATABASE_URL"]
    scheme, rest = url.split("://", 1)
    _, at = rest.split("@", 1)
    return f"{scheme}://{ROLE}@{at}"


def refused(conn: psycopg.Connection[Any], sql: str, *params: Any) -> str:
    """The first line of the database's refusal; fails the test if the statement went through."""
    try:
        with conn.transaction():
            conn.execute(sql, params)
    except psycopg.Error as exc:
        return str(exc).splitlines()[0]
    raise AssertionError(f"the database accepted, as {ROLE}: {sql}")


def test_the_back_office_runs_as_the_application_role_and_the_database_refuses_it_every_rewrite() -> None:
    req = submit_and_approve()
    # A worker run and the health check as the application's role, as `make run` and production do.
    env = subprocess_env(DATABASE_URL=role_url())
    ran = subprocess.run(
        manage_argv("run_deletion", str(req.id), "--executor-id", "worker-role"),
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    shown = subprocess.run(
        manage_argv("show_deletion", str(req.id), "--json"), cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert shown.returncode == 0 and "completed" in shown.stdout, shown.stderr

    with as_role() as conn:
        who = conn.execute(
            "SELECT current_user, rolsuper, rolcreatedb, rolcreaterole, rolbypassrls FROM pg_roles"
            " WHERE rolname = current_user"
        ).fetchone()
        assert who == (ROLE, False, False, False, False)
        owned = conn.execute("SELECT count(*) FROM pg_tables WHERE tableowner = current_user").fetchone()
        assert owned == (0,)
        rid = str(req.id)
        stage = "SELECT id FROM entity_deletion_stage_history WHERE request_id = %s AND stage = 'gate_user'"
        evidence = "is evidence once final: never rewritten"
        # Completed stage history: its result, operation id and times.
        for change in (
            "metadata_json = jsonb_set(metadata_json, '{result}', '{\"forged\": true}')",
            "operation_id = gen_random_uuid()",
            "finished_at = now()",
            "is_current = true",
        ):
            assert evidence in refused(
                conn, f"UPDATE entity_deletion_stage_history SET {change} WHERE id = ({stage})", rid
            ), change
        deleted = "is evidence: never deleted (but by the retention job)"
        assert deleted in refused(conn, "DELETE FROM entity_deletion_stage_history WHERE request_id = %s", rid)
        # Attempts and lease events.
        assert evidence in refused(
            conn, "UPDATE entity_deletion_stage_attempts SET error = 'forged' WHERE request_id = %s", rid
        )
        assert deleted in refused(conn, "DELETE FROM entity_deletion_stage_attempts WHERE request_id = %s", rid)
        never = "evidence rows are never rewritten or deleted"
        assert never in refused(conn, "UPDATE entity_deletion_lease_events SET owner = 'x' WHERE request_id = %s", rid)
        assert never in refused(conn, "DELETE FROM entity_deletion_lease_events WHERE request_id = %s", rid)
        assert never in refused(conn, "DELETE FROM entity_deletion_decisions WHERE request_id = %s", rid)
        # Truncation skips row triggers: the role holds no TRUNCATE; nor may it switch triggers off.
        for table in (
            "entity_deletion_stage_history",
            "entity_deletion_stage_attempts",
            "entity_deletion_lease_events",
            "entity_deletion_decisions",
            "entity_deletion_approvals",
            "retirements_decision",
        ):
            assert "permission denied" in refused(conn, f"TRUNCATE {table} CASCADE"), table
            assert "must be owner" in refused(conn, f"ALTER TABLE {table} DISABLE TRIGGER ALL"), table
        assert "permission denied" in refused(conn, "SET session_replication_role = replica")
        (trigger,) = conn.execute(
            "SELECT tgname FROM pg_trigger WHERE tgname LIKE 'pgtrigger_completed_stage_is_evidence%'"
        ).fetchone()  # type: ignore[misc]
        assert "must be owner" in refused(conn, f"DROP TRIGGER {trigger} ON entity_deletion_stage_history")

    # Nothing changed: the stage history still reads as the worker left it.
    row = DeletionRequest.objects.get(id=req.id).stages.get(stage="gate_user")
    assert row.status == "completed" and "forged" not in json.dumps(row.metadata_json)


def test_the_default_settings_connect_as_the_application_role_and_migrate_as_the_owner() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "EMBEDDED_PG", "DJANGO_"))}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    code = (
        "import django; django.setup(); from django.conf import settings as s; d = s.DATABASES;"
        "print(d['default']['USER'], d['default']['MIGRATION']['USER'], sorted(d))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [ROLE, "postgres", "['default']"]  # no receiver's database: it is its own
