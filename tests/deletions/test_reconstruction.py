"""Saved history that cannot be reconstructed stops the run; nothing is invented."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from deletions.models import DeletionRequest, StageHistory
from deletions.store.stages import MAX_STAGES
from tests.conftest import submit_and_approve
from tests.deletions.helpers import show_rows
from tests.support import force

pytestmark = pytest.mark.django_db(transaction=True)


def stage_rows(request_id: uuid.UUID) -> list[tuple]:
    return list(StageHistory.objects.filter(request_id=request_id).order_by("id").values_list())


def corrupt_after_gate(cmd, mutate) -> tuple[DeletionRequest, object]:
    req = submit_and_approve()
    assert cmd("run_deletion", str(req.id), "--next-step").code == 0
    mutate(StageHistory.objects.get(request_id=req.id, is_current=True))
    return req, stage_rows(req.id)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda row: StageHistory.objects.filter(id=row.id).update(stage="purge_files"), "unknown stage 'purge_files'"),
        (
            lambda row: StageHistory.objects.filter(id=row.id).update(
                metadata_json={**row.metadata_json, "previous_stage_id": str(uuid.uuid4())}
            ),
            "disconnected history",
        ),
        (
            lambda row: StageHistory.objects.filter(id=row.id).update(
                metadata_json={**row.metadata_json, "inputs": {"target": "demo:mallory", "community_id": "x"}}
            ),
            "disagree with the approved inventory",
        ),
    ],
)
def test_run_refuses_corrupt_history_without_writing_stages(cmd, mutate, message: str) -> None:
    req, before = corrupt_after_gate(cmd, mutate)
    ran = cmd("run_deletion", str(req.id))
    assert ran.code == 1 and message in ran.err
    assert stage_rows(req.id) == before
    request, _, _ = show_rows(req.id)
    assert request["status"] == "running" and request["lease_owner"] is None


def test_missing_has_agents_is_refused_not_skipped(cmd) -> None:
    req = submit_and_approve()
    assert cmd("run_deletion", str(req.id), "--next-step").code == 0
    assert cmd("run_deletion", str(req.id), "--next-step").code == 0  # B purge_db done, B agents current
    b_db = StageHistory.objects.get(request_id=req.id, stage="purge_db")
    meta = dict(b_db.metadata_json)
    meta["result"] = {"purged_rows": 0}
    force(StageHistory.objects.filter(id=b_db.id), metadata_json=meta)  # evidence rewritten behind our back
    before = stage_rows(req.id)
    ran = cmd("run_deletion", str(req.id))
    assert ran.code == 1 and "no boolean has_agents" in ran.err
    assert stage_rows(req.id) == before


@pytest.mark.slow
def test_history_beyond_10000_stages_is_refused(cmd) -> None:
    req = submit_and_approve()
    assert cmd("run_deletion", str(req.id), "--next-step").code == 0
    now = timezone.now()
    StageHistory.objects.bulk_create(
        StageHistory(
            request_id=req.id, stage="purge_db", status="completed", is_current=False, metadata_json={}, created_at=now
        )
        for _ in range(MAX_STAGES)
    )
    count = StageHistory.objects.filter(request_id=req.id).count()
    ran = cmd("run_deletion", str(req.id))
    assert ran.code == 1 and "more than 10,000 stages" in ran.err
    assert StageHistory.objects.filter(request_id=req.id).count() == count
    assert StageHistory.objects.get(request_id=req.id, is_current=True).status == "pending"
