"""Integrity faults are alarms (issue 43, item 4): records that contradict themselves (an inventory
changed behind the back-office, an approval that fails its own check, evidence that names another
effect) are refused with nothing applied, raise an `integrity_fault` alarm that health and /metrics
report as a fault of the system, and the case page says what was found and offers no action the
system would refuse (approving the same inventory again)."""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.urls import reverse

from core import clock
from core.authority import named
from deletions import authority, worker
from deletions.contract import StageSnapshot
from deletions.errors import Refused
from deletions.models import DeletionRequest, StageHistory
from deletions.services import deletion_approve
from ops.health import report
from tests.conftest import submit_and_approve

pytestmark = pytest.mark.django_db


def behind_the_back_office(sql: str, params: list) -> None:
    """A write that bypasses every trigger (a restored dump, a hand fix as the table's owner)."""
    with connection.cursor() as cur:
        cur.execute("SET session_replication_role = replica")
        try:
            cur.execute(sql, params)
        finally:
            cur.execute("SET session_replication_role = origin")


def faulted() -> DeletionRequest:
    req = submit_and_approve("demo:integrity1")
    changed = [*req.inventory_json["communities"][:1]]  # one community fewer than approved
    inventory = {**req.inventory_json, "communities": changed}
    behind_the_back_office(
        "UPDATE entity_deletion_requests SET inventory_json = %s WHERE id = %s", [json.dumps(inventory), req.id]
    )
    worker.run(req.id, executor_id="worker-a")
    return DeletionRequest.objects.get(id=req.id)


def test_an_inventory_changed_behind_the_back_office_is_an_alarm_and_no_approval_is_advised(client) -> None:
    req = faulted()
    assert req.status == "needs_review"
    assert not StageHistory.objects.filter(request=req, status="completed").exists()  # nothing applied
    alarm = req.alarms.get(resolved_at__isnull=True)
    assert alarm.kind == "integrity_fault" and "does not match the saved digest" in alarm.message
    assert req.open_question.startswith("integrity fault: the inventory this run read")
    assert "a person investigates and closes the alarm with what they found (close_alarm)" in req.open_question
    assert "approve the same inventory again" not in req.open_question
    # Health and /metrics: a fault of the system.
    checks = report(clock.now())["checks"]
    assert checks["integrity_faults"] == {"ok": False, "count": 1}
    # The case page says what was found and disables approval with the reason the service gives.
    client.force_login(User.objects.get(username="operator-c"))
    page = client.get(reverse("admin:deletions_deletionrequest_change", args=[req.id])).content.decode()
    assert "The saved inventory no longer matches its digest" in page
    assert "an integrity fault is open on this case, so it cannot be approved" in page
    with pytest.raises(Refused, match="an integrity fault is open on this case, so it cannot be approved"):
        deletion_approve(request_id=req.id, actor=named("operator-c"), digest=req.inventory_digest)


def test_the_metrics_count_integrity_faults(client, settings) -> None:
    faulted()
    settings.METRICS_TOKEN = "t" * 40
    body = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {'t' * 40}").content.decode()
    assert "backoffice_integrity_faults 1.0" in body


def test_an_approval_row_that_fails_its_own_check_is_an_integrity_fault() -> None:
    req = submit_and_approve("demo:integrity2")
    behind_the_back_office(
        "UPDATE entity_deletion_approvals SET inventory_digest = %s WHERE request_id = %s", ["0" * 64, req.id]
    )
    worker.run(req.id, executor_id="worker-a")
    req = DeletionRequest.objects.get(id=req.id)
    assert req.status == "needs_review" and req.open_question.startswith("integrity fault: approval covers digest")
    assert req.alarms.get(resolved_at__isnull=True).kind == "integrity_fault"
    assert not StageHistory.objects.filter(request=req, status="completed").exists()


def snapshot(**kw) -> StageSnapshot:
    base = dict(
        id=uuid.uuid4(), stage="purge_db", community_id="c-1", status="running", is_current=True,
        metadata={}, started_at=None, finished_at=None, last_error=None, operation_id=uuid.uuid4(), attempts=1,
    )  # fmt: skip
    return StageSnapshot(**{**base, **kw})


def test_evidence_that_names_another_effect_contradicts_its_stage() -> None:
    row = snapshot()
    assert authority.contradiction({"deleted": 3, "community_id": "c-1"}, row) == ""
    assert "names community_id 'c-2'" in authority.contradiction({"community_id": "c-2"}, row)
    assert "names operation_id" in authority.contradiction({"operation_id": str(uuid.uuid4())}, row)
    assert "names action 'gate_user'" in authority.contradiction({"action": "gate_user"}, row)
    assert "is no record (list)" in authority.contradiction([], row)
