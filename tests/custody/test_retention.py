"""Retention: a closed case past its period becomes a tombstone and the rest of it goes, in both
workflows; open cases, held ones and open investigations are never touched; the evidence triggers
allow exactly that job's deletions."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import time_machine
from django.db import connection, transaction
from django.db.utils import IntegrityError, InternalError
from django.utils import timezone

from core.authority import named
from deletions import worker
from deletions.models import DeletionAlarm, DeletionDecision, DeletionRequest, StageHistory
from ops import retention
from ops.models import RetentionRun, Tombstone
from retirements.models import RetirementRequest
from retirements.services import retirement_cancel
from tests.conftest import submit_and_approve

pytestmark = pytest.mark.django_db

CASE_TABLES = {
    "entity_deletion_requests": "id",
    "entity_deletion_stage_history": "request_id",
    "entity_deletion_approvals": "request_id",
    "entity_deletion_decisions": "request_id",
    "entity_deletion_stage_attempts": "request_id",
    "entity_deletion_lease_events": "request_id",
}
RETIREMENT_TABLES = {
    "retirements_retirementrequest": "id",
    "retirements_noticeslot": "request_id",
    "retirements_decision": "request_id",
    "retirements_retirementwatcher": "request_id",
}


def rows_of(case_id, tables) -> dict[str, int]:
    with connection.cursor() as cur:
        out = {}
        for table, column in tables.items():
            cur.execute(f"SELECT count(*) FROM {table} WHERE {column} = %s", [str(case_id)])
            out[table] = cur.fetchone()[0]
    return out


def completed(target: str) -> DeletionRequest:
    req = submit_and_approve(target)
    worker.run(req.id, executor_id="worker-retention")
    req = DeletionRequest.objects.get(id=req.id)
    assert req.status == "completed"
    return req


def retirement(cmd, slug: str, *, cancel: bool) -> RetirementRequest:
    assert cmd("create_workspace", "--slug", slug, "--name", slug, "--disabled").code == 0
    ran = cmd("request_retirement", "--workspace", slug, "--requested-by", "operator-a", "--reason", "closed",
              "--confirm", slug)  # fmt: skip
    req = RetirementRequest.objects.get(id=json.loads(ran.out)["id"])
    if cancel:
        retirement_cancel(actor=named("operator-b"), request_id=req.id, reason="kept after all")
    return req


def test_retention_on_a_mix_of_open_held_and_old_closed_cases(cmd, observe) -> None:
    long_ago = timezone.now() - timedelta(days=800)
    with time_machine.travel(long_ago, tick=True):
        old = completed("demo:old-gone")
        held = completed("demo:old-held")
        probed = completed("demo:old-probed")
        still_open = DeletionRequest.objects.get(id=submit_and_approve("demo:old-open").id)
        old_retirement = retirement(cmd, "ws-old-gone", cancel=True)
        open_retirement = retirement(cmd, "ws-old-open", cancel=False)
    with time_machine.travel(timezone.now() - timedelta(days=400), tick=True):
        middle = completed("demo:middle")  # past its lease history's and its evidence's periods only
    with time_machine.travel(timezone.now() - timedelta(days=100), tick=True):
        recent = completed("demo:recent")  # past its lease history's period only
    retention.place_hold(actor=named("operator-b"), kind="deletion", case_id=held.id, reason="complaint 77 open")
    DeletionAlarm.objects.create(request=probed, kind="effect_unknown", message="looked into", created_at=long_ago)
    before = {r.id: rows_of(r.id, CASE_TABLES) for r in (old, held, probed, still_open, middle, recent)}
    before |= {r.id: rows_of(r.id, RETIREMENT_TABLES) for r in (old_retirement, open_retirement)}
    assert (
        before[old.id]["entity_deletion_stage_attempts"] > 0 and before[recent.id]["entity_deletion_lease_events"] > 0
    )

    dry = cmd("apply_retention", "--dry-run")
    assert dry.code == 0, dry.err
    counts = json.loads(dry.out)["counts"]
    assert counts["deletion tombstones"] == 1 and counts["retirement tombstones"] == 1
    assert (
        counts["deletions kept: under a records hold"] == 1 and counts["deletions kept: its investigation is open"] == 1
    )
    assert counts["deletions trimmed"] == 2  # the middle and the recent one
    assert (
        not Tombstone.objects.exists() and rows_of(old.id, CASE_TABLES) == before[old.id]
    )  # a dry run deletes nothing

    ran = cmd("apply_retention")
    assert ran.code == 0, ran.err
    after = {r: rows_of(r, CASE_TABLES) for r in (old.id, held.id, probed.id, still_open.id, middle.id, recent.id)}
    after |= {r: rows_of(r, RETIREMENT_TABLES) for r in (old_retirement.id, open_retirement.id)}
    assert set(after[old.id].values()) == {0} and set(after[old_retirement.id].values()) == {0}
    for kept in (held.id, probed.id, still_open.id, open_retirement.id):
        assert after[kept] == before[kept], kept
    for trimmed in (middle.id, recent.id):
        assert after[trimmed]["entity_deletion_stage_attempts"] == after[trimmed]["entity_deletion_lease_events"] == 0
        assert after[trimmed]["entity_deletion_decisions"] == before[trimmed]["entity_deletion_decisions"]
    results = {r: [bool((s.metadata_json or {}).get("result")) for s in StageHistory.objects.filter(request_id=r)]
               for r in (middle.id, recent.id)}  # fmt: skip
    assert not any(results[middle.id]) and all(results[recent.id])  # the evidence copies went after 365 days
    stones = {t.case_id: t for t in Tombstone.objects.all()}
    assert set(stones) == {old.id, old_retirement.id}
    stone = stones[old.id]
    assert (stone.outcome, stone.closed_at) == ("completed", old.completed_at)
    assert (
        stone.approver_ids == [named("operator-b").user.pk]
        and len(stone.operation_ids) == before[old.id]["entity_deletion_stage_history"]
    )
    assert stone.proof_digest.startswith("sha256:")
    assert "old-gone" not in json.dumps([t.__dict__ for t in stones.values()], default=str)  # no identifiers
    log = RetentionRun.objects.filter(dry_run=False).get()
    assert log.counts["deletion tombstones"] == 1 and log.finished_at is not None and not log.stopped_early
    observe(f"retention: before {sum(map(sum, (v.values() for v in before.values())))} rows, "
            f"after {sum(map(sum, (v.values() for v in after.values())))}; tombstones {len(stones)}")  # fmt: skip


def test_the_override_and_a_second_run_change_nothing_more(cmd) -> None:
    with time_machine.travel(timezone.now() - timedelta(days=10), tick=True):
        req = completed("demo:ten-days")
    assert json.loads(cmd("apply_retention").out)["counts"] == {}  # ten days closed: nothing is due
    assert DeletionRequest.objects.filter(id=req.id).exists()
    once = json.loads(cmd("apply_retention", "--closed-case-days", "5").out)
    assert once["periods"]["closed_case"] == 5 and once["counts"]["deletion tombstones"] == 1
    assert not DeletionRequest.objects.filter(id=req.id).exists()
    assert json.loads(cmd("apply_retention", "--closed-case-days", "5").out)["counts"] == {}  # nothing more
    refused = cmd("apply_retention", "--closed-case-days", "-1")
    assert refused.code == 2 and "a number of days" in refused.err


def test_a_case_whose_effects_were_reapplied_after_a_restore_is_erased_whole(cmd) -> None:
    """Its re-applications (evidence rows that name the case) go with it, never stop it."""
    with time_machine.travel(timezone.now() - timedelta(days=10), tick=True):
        req = completed("demo:reapplied")
    stage = StageHistory.objects.filter(request=req, stage="purge_db").first()
    assert stage is not None
    with connection.cursor() as cur:  # (as the re-application statement writes one, answered)
        cur.execute(
            "INSERT INTO entity_deletion_reapplications (id, request_id, stage_id, first_operation_id, operation_id,"
            " generation, because, created_at, answer) VALUES (gen_random_uuid(), %s, %s, %s, gen_random_uuid(), 2,"
            " 'the receiver went back in time', now(), '{\"evidence\": {}}')",
            [str(req.id), str(stage.id), str(stage.operation_id)],
        )
    assert rows_of(req.id, {"entity_deletion_reapplications": "request_id"}) == {"entity_deletion_reapplications": 1}
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic(), connection.cursor() as cur:
        cur.execute("DELETE FROM entity_deletion_reapplications WHERE request_id = %s", [str(req.id)])
    erased = json.loads(cmd("apply_retention", "--closed-case-days", "5").out)
    assert erased["counts"]["deletion tombstones"] == 1, erased
    assert not DeletionRequest.objects.filter(id=req.id).exists()
    assert rows_of(req.id, {"entity_deletion_reapplications": "request_id"}) == {"entity_deletion_reapplications": 0}


def test_evidence_is_deleted_only_by_the_retention_job() -> None:
    req = completed("demo:evidence")
    decision = DeletionDecision.objects.filter(request=req).first()
    assert decision is not None
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        DeletionDecision.objects.filter(id=decision.id).delete()
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        DeletionDecision.objects.filter(id=decision.id).update(reason="rewritten")
    assert DeletionDecision.objects.filter(id=decision.id, reason=decision.reason).exists()


def test_a_records_hold_is_a_decision_with_a_reason_and_a_permission(cmd) -> None:
    from django.contrib.auth.models import Group, User

    req = completed("demo:held-by-hand")
    support = User.objects.create_user("support-4", is_staff=True)
    support.groups.add(Group.objects.get(name="support (read-only)"))
    refused = cmd("records_hold", str(req.id), "--kind", "deletion", "--by", "support-4", "--reason", "x")
    assert refused.code == 1 and "records hold" in refused.err
    placed = cmd("records_hold", str(req.id), "--kind", "deletion", "--by", "operator-b", "--reason", "complaint 9")
    assert placed.code == 0 and json.loads(placed.out)["held"] is True
    again = cmd("records_hold", str(req.id), "--kind", "deletion", "--by", "operator-b", "--reason", "again")
    assert again.code == 1 and "already under a records hold" in again.err
    assert json.loads(cmd("apply_retention", "--closed-case-days", "0").out)["counts"] == {
        "deletions kept: under a records hold": 1
    }
    released = cmd("records_hold", str(req.id), "--kind", "deletion", "--by", "operator-b", "--reason", "closed",
                   "--release")  # fmt: skip
    assert released.code == 0 and json.loads(released.out)["held"] is False
    assert json.loads(cmd("apply_retention", "--closed-case-days", "0").out)["counts"]["deletion tombstones"] == 1
