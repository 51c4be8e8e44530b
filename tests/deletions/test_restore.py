"""Case records restored from a backup after an effect: the operation is recognised, not repeated."""

from __future__ import annotations

import pgtrigger
import pytest
from django.db import connection

from deletions.models import DeletionRequest, StageHistory
from deletions.users.inventory import COMMUNITY_B
from tests.conftest import submit_and_approve
from tests.deletions.helpers import effects

pytestmark = pytest.mark.django_db(transaction=True)


def snapshot(request_id) -> tuple[list, list, list]:
    with connection.cursor() as cur:
        cur.execute("SELECT * FROM entity_deletion_requests WHERE id = %s", [request_id])
        req = cur.fetchall()
        cur.execute("SELECT * FROM entity_deletion_approvals WHERE request_id = %s", [request_id])
        approvals = cur.fetchall()
        cur.execute("SELECT * FROM entity_deletion_stage_history WHERE request_id = %s", [request_id])
        return req, approvals, cur.fetchall()


def restore(request_id, backup: tuple[list, list, list]) -> None:
    """Put the case records back as they were; the target system keeps what it applied."""
    req_rows, approval_rows, stage_rows = backup
    # A restore replaces the case tables whole, as pg_restore --disable-triggers does: the
    # append-only guard on the decision log is for the application, not for a restore.
    with pgtrigger.ignore("deletions.DeletionDecision:append_only"), connection.cursor() as cur:
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
    assert len(ops) == len(set(ops)) == 5
    assert set(applied_before) <= set(effects(req.id))
    observe(
        "records restored to before B purge_db; the rerun reused its operation id and the target returned "
        "the first outcome: 5 operations, none applied twice"
    )


def test_operation_ids_are_stable_for_the_same_intended_effect() -> None:
    import uuid

    from deletions.store.stages import operation_id
    from deletions.users.inventory import COMMUNITY_C

    rid, other = uuid.uuid4(), uuid.uuid4()
    assert operation_id(rid, "purge_db", COMMUNITY_B) == operation_id(rid, "purge_db", COMMUNITY_B)
    assert operation_id(rid, "purge_db", COMMUNITY_B) != operation_id(rid, "purge_db", COMMUNITY_C)
    assert operation_id(rid, "purge_db", COMMUNITY_B) != operation_id(rid, "purge_agents", COMMUNITY_B)
    assert operation_id(rid, "purge_db", COMMUNITY_B) != operation_id(other, "purge_db", COMMUNITY_B)
