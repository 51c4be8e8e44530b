"""The target system is a separate database (the demo application, served by the dataset receiver like
any database): what a case believes is what the receiver recorded there, and it refuses what the
approval did not cover (a changed source, a community outside the approved inventory, a record it did
not make)."""

from __future__ import annotations

import json
import signal
import uuid
from datetime import timedelta

import psutil
import pytest
from django.db import connection, connections
from django.utils import timezone

from deletions.models import DeletionRequest, StageHistory
from deletions.rules.inventory import COMMUNITY_B, COMMUNITY_C
from deletions.store.stages import operation_id
from deletions.tasks import StageFailed, run_deletion
from tests import target
from tests.deletions.helpers import believed, effects, recorded, signed_grant, start_worker
from tests.support import force, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def submit(cmd, target: str) -> dict:
    ran = cmd("submit_deletion", "--target", target, "--requested-by", "operator-a")
    assert ran.code == 0, ran.err
    return json.loads(ran.out)


def approve(cmd, req: dict, by: str = "operator-b") -> None:
    ran = cmd("approve_deletion", req["id"], "--approved-by", by, "--inventory-digest", req["inventory_digest"])
    assert ran.code == 0, ran.err


def results(rid: str) -> dict[tuple[str, str | None], dict]:
    return {
        (s.stage, str(s.target_community_id) if s.target_community_id else None): s.metadata_json.get("result")
        for s in StageHistory.objects.filter(request_id=uuid.UUID(rid))
    }


def test_a_full_run_leaves_its_evidence_at_the_target_and_none_in_the_case_database(cmd, observe) -> None:
    req = submit(cmd, "demo:evidence")
    before = target.at_target("demo:evidence")
    approve(cmd, req)
    assert cmd("run_deletion", req["id"]).code == 0
    saved = results(req["id"])
    for cid in (COMMUNITY_B, COMMUNITY_C):
        db, agents = saved[("purge_db", cid)], saved[("purge_agents", cid)]
        assert (db["rows_before"], db["rows_deleted"], db["rows_remaining"]) == (before[cid]["rows"],) * 2 + (0,)
        assert (agents["agents_removed"], agents["agents_remaining"]) == (before[cid]["agents"], 0)
        assert agents["version_after"] > db["version_after"] > before[cid]["version"]  # moved on by each effect
    after = target.at_target("demo:evidence")
    assert all(c["rows"] == 0 and c["agents"] == 0 for c in after.values())
    ops = [op for op, _, _ in effects(req["id"])]
    assert len(ops) == len(set(ops)) == 6
    own = saved[("purge_db", target.OWN_RECORDS)]  # the last effect: nothing of theirs there, the walk run
    assert own["rows_deleted"] == 0 and own["catalog_walk"]["foreign_key_paths"] > 0 and own["remains"] == {}
    for stage in StageHistory.objects.filter(request_id=req["id"]):  # read there and signed, not sent by the worker
        assert believed(stage.metadata_json["result"]) == recorded(stage.operation_id)
    assert not [t for t in connection.introspection.table_names() if "target" in t]
    # The case shows the approved preview beside the evidence, not the target's now-empty data.
    shown = json.loads(cmd("show_deletion", req["id"], "--json").out)
    assert "approved" in shown["proposal"]["source"]
    assert {c["community_id"]: c["rows"] for c in shown["proposal"]["communities"]} == {
        **{cid: before[cid]["rows"] for cid in (COMMUNITY_B, COMMUNITY_C)},
        target.OWN_RECORDS: 0,
    }
    b_db = next(s for s in shown["stages"] if s["stage"] == "purge_db" and s["target_community_id"] == COMMUNITY_B)
    assert b_db["evidence"]["rows_deleted"] == before[COMMUNITY_B]["rows"] and b_db["evidence"]["rows_remaining"] == 0
    assert set(b_db["evidence"]) >= {"rows_before", "version_after", "applied_at", "generation"}
    observe(
        f"6 operations at the target, once each; B rows {before[COMMUNITY_B]['rows']} deleted, C rows "
        f"{before[COMMUNITY_C]['rows']} deleted, 0 remaining; the case database holds no target table"
    )


def test_a_row_added_after_approval_sends_the_case_back_to_review_and_a_new_approval_completes_it(cmd, observe) -> None:
    req = submit(cmd, "demo:changed")
    approve(cmd, req)
    for _ in range(3):  # gate, B purge_db, B purge_agents
        assert cmd("run_deletion", req["id"], "--next-step").code == 0
    rows_then = target.at_target("demo:changed")[COMMUNITY_C]["rows"]
    target.add_rows("demo:changed", COMMUNITY_C, 4)

    refused = cmd("run_deletion", req["id"])
    assert refused.code == 1 and "back in review, nothing applied" in refused.err and "source changed" in refused.err
    case = DeletionRequest.objects.get(id=req["id"])
    assert case.status == "needs_review" and case.owner == "approvers" and "source changed" in case.open_question
    assert target.at_target("demo:changed")[COMMUNITY_C]["rows"] == rows_then + 4  # nothing applied there
    shown = json.loads(cmd("show_deletion", req["id"], "--json").out)
    c_line = next(c for c in shown["proposal"]["communities"] if c["community_id"] == COMMUNITY_C)
    assert c_line["rows"] == rows_then + 4  # the fresh evidence the approvers see

    approve(cmd, req, "operator-c")  # a new approval of the proposal as it is now
    assert cmd("run_deletion", req["id"]).code == 0
    assert DeletionRequest.objects.get(id=req["id"]).status == "completed"
    c_db = results(req["id"])[("purge_db", COMMUNITY_C)]
    assert c_db["rows_deleted"] == rows_then + 4 and c_db["rows_remaining"] == 0
    ops = [op for op, _, _ in effects(req["id"])]
    assert len(ops) == len(set(ops)) == 6
    observe(
        f"4 rows added in C after approval: refused at the target (source changed), back in review with C at "
        f"{rows_then + 4} rows; re-approved: completed, C deleted {c_db['rows_deleted']}, 6 operations once each"
    )


def test_a_row_in_a_table_added_since_the_install_refuses_the_last_effect_and_the_case_is_never_completed(
    cmd, observe
) -> None:
    """The demo application keeps everything of a person in a community, and their inventory still ends
    with their own records: that effect runs the completeness walk, which finds the row the dataset file
    does not know (a migration since the install) and refuses; every community is purged, the case is
    never completed."""
    req = submit(cmd, "demo:migrated")
    approve(cmd, req)
    with connections["target"].cursor() as cur:  # the application ships a migration the dataset file does not know
        cur.execute(
            "CREATE TABLE public.bookmarks (id bigserial PRIMARY KEY, person_id bigint NOT NULL REFERENCES people)"
        )
        cur.execute("INSERT INTO public.bookmarks (person_id) SELECT id FROM people WHERE handle = 'migrated'")
    try:
        ran = cmd("run_deletion", req["id"])
        with connections["target"].cursor() as cur:
            cur.execute("SELECT count(*) FROM public.bookmarks")
            (left,) = cur.fetchone()
    finally:
        with connections["target"].cursor() as cur:
            cur.execute("DROP TABLE public.bookmarks")
    assert ran.code == 1, ran.out + ran.err
    case = DeletionRequest.objects.get(id=req["id"])
    assert case.status == "needs_attention" and case.completed_at is None, case.status
    assert "data remains" in case.open_question and "bookmarks" in case.open_question, case.open_question
    # Each community's effects applied; the last refused whole: nothing recorded for their own records.
    applied = [(action, str(community)) for _, action, community, _, _ in target.operations(req["id"])]
    assert [a for a, _ in applied] == ["gate_user", "purge_db", "purge_agents", "purge_db", "purge_agents"]
    assert target.OWN_RECORDS not in {c for _, c in applied} and left == 1
    current = StageHistory.objects.get(request_id=req["id"], is_current=True)
    assert (current.stage, str(current.target_community_id)) == ("purge_db", target.OWN_RECORDS)
    observe(f"a row in a table added since the install: {case.status}, {case.open_question}")


def test_an_inventory_swapped_around_the_claim_lands_nothing_outside_the_approved_inventory(cmd, observe) -> None:
    """The stored inventory is swapped (by hand, guards off) for one naming community X, the worker
    reads it as its plan, and the inventory is restored before the effects: the run's inventory is
    not the approved one, so its first grant is refused and nothing is applied, X least of all."""
    x = str(uuid.UUID(int=0xABC))
    req = submit(cmd, "demo:swap")
    approve(cmd, req)
    target.add_rows("demo:swap", x, 5)
    rows = DeletionRequest.objects.filter(id=req["id"])
    original = rows.get().inventory_json
    swapped = {**original, "communities": [{"id": x, "role": "participant"}, original["communities"][1]]}
    force(rows, inventory_json=swapped)
    worker = start_worker(req["id"], "--executor-id", "worker-a", PAUSE_AT="after-submit-mark")
    proc = psutil.Process(worker.pid)
    try:
        wait_for(lambda: proc.status() == psutil.STATUS_STOPPED, what="the worker paused with the swapped plan")
        force(rows, inventory_json=original)  # restored before its first effect
        worker.send_signal(signal.SIGCONT)
        _, err = worker.communicate(timeout=120)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 1 and "the inventory this run read" in err and "does not match" in err, err
    case = rows.get()
    assert case.status == "needs_review" and "the inventory this run read" in case.open_question
    assert effects(req["id"]) == []  # not the gate, not X, nothing
    assert target.at_target("demo:swap")[x]["rows"] == 5
    observe(f"plan read with X swapped in, inventory restored: refused at the first grant ({case.status}), X rows 5")


def test_a_stage_moved_to_a_community_outside_the_inventory_is_refused_before_its_grant(cmd, observe) -> None:
    """The current stage row is pointed at community X (by hand, guards off): X is in no run's plan,
    so the run refuses the row before any grant (the rules' replay names it) and X is never touched."""
    x = str(uuid.UUID(int=0xABD))
    req = submit(cmd, "demo:moved")
    approve(cmd, req)
    assert cmd("run_deletion", req["id"], "--next-step").code == 0  # the gate; a community's purge is current
    target.add_rows("demo:moved", x, 5)  # (after the gate, which refuses rows in a community it did not see)
    force(StageHistory.objects.filter(request_id=req["id"], is_current=True), target_community_id=x)
    ran = cmd("run_deletion", req["id"])
    assert ran.code == 1 and f"is purge_db for {x}; rules v1 expected purge_db for" in ran.err, ran.err
    assert [a for _, a, _ in effects(req["id"])] == ["gate_user"]
    assert target.at_target("demo:moved")[x]["rows"] == 5
    observe(f"current stage moved to X: refused before its grant ({ran.err}), X rows still 5")


def test_a_record_planted_under_a_stages_operation_id_is_refused_not_adopted(cmd, observe) -> None:
    req = submit(cmd, "demo:planted")
    approve(cmd, req)
    gate_op = operation_id(uuid.UUID(req["id"]), "gate_user", None)
    with connections["target"].cursor() as cur:
        cur.execute(
            """INSERT INTO receiver.receiver_operations
               (operation_id, request_id, action, community_id, generation, executor, "grant", evidence, applied_at)
               VALUES (%s, %s, 'gate_user', NULL, 1, 'someone', '', %s, %s)""",
            [gate_op, req["id"], json.dumps({"gated": True}), timezone.now() - timedelta(days=1)],
        )
    # The queued run: django-q2 lists it as failed, not as a success.
    with pytest.raises(StageFailed, match="back in review, nothing applied"):
        run_deletion(req["id"])
    case = DeletionRequest.objects.get(id=req["id"])
    gate = StageHistory.objects.get(request_id=req["id"], stage="gate_user")
    assert case.status == "needs_review" and "not made by a grant" in case.open_question
    assert "record_mismatch" in case.open_question and case.owner == "approvers" and case.next_check_at
    assert gate.status == "pending" and gate.metadata_json.get("result") is None  # not adopted
    assert target.show("demo:planted")["gated"] is False  # and nothing was applied in its name
    # A foreign record is an integrity fault: an alarm health reports, and no advice to approve again.
    alarm = case.alarms.get(resolved_at__isnull=True)
    assert alarm.kind == "integrity_fault" and str(gate_op) in alarm.message
    assert "integrity fault" in case.open_question and "approve" not in case.open_question.split(";")[-1]
    health = cmd("health", "--json")
    assert health.code == 1 and json.loads(health.out)["checks"]["integrity_faults"] == {"ok": False, "count": 1}
    # No approval clears it (the page offers none); a cancellation ends the case, not its alarm: a person
    # who looked into it closes that, with what they found.
    refused = cmd(
        "approve_deletion", req["id"], "--approved-by", "operator-c", "--inventory-digest", req["inventory_digest"]
    )
    assert refused.code == 1 and "an integrity fault is open on this case" in refused.err
    assert (
        cmd("cancel_deletion", req["id"], "--by", "operator-c", "--reason", "planted record: investigating").code == 0
    )
    assert case.alarms.filter(resolved_at__isnull=True).exists()
    closed = cmd("close_alarm", req["id"], "--by", "operator-c", "--reason", "planted by a test of the receiver")
    assert closed.code == 0, closed.err
    assert not case.alarms.filter(resolved_at__isnull=True).exists()
    observe(f"planted record under {str(gate_op)[:8]}: refused ({case.status}), gate not completed, person not gated")


def test_the_effect_lands_in_one_transaction_once_and_a_refused_one_leaves_nothing_behind(cmd) -> None:
    from core import grants
    from receiver import effects as said
    from receiver.dataset import backend

    target.enroll("demo:onestatement")
    backend.preview("demo:onestatement", [COMMUNITY_B, COMMUNITY_C])  # the approval's look: versions kept
    before = target.at_target("demo:onestatement")[COMMUNITY_B]
    token = signed_grant("demo:onestatement", COMMUNITY_B, before["version"])
    evidence = backend.apply(token)
    assert (evidence["rows_before"], evidence["rows_deleted"], evidence["rows_remaining"]) == (
        before["rows"],
        before["rows"],
        0,
    )
    assert evidence["version_before"] == before["version"] < evidence["version_after"]
    g = grants.verify(token, grants.receiver_key())
    saved = [e for op, *_, e in target.operations(g["request_id"]) if str(op) == g["operation_id"]]
    assert [json.loads(e) if isinstance(e, str) else e for e in saved] == [evidence]
    assert backend.apply(token) == evidence  # applied once: the same operation answers with its first record
    assert len(target.operations(g["request_id"])) == 1

    # A grant for the version the approval saw, now moved on: refused, and its fence is not raised.
    stale_version = signed_grant(
        "demo:onestatement", COMMUNITY_C, target.at_target("demo:onestatement")[COMMUNITY_C]["version"] - 1
    )
    with pytest.raises(said.SourceChanged, match="the approval saw version"):
        backend.apply(stale_version)
    request_id = grants.verify(stale_version, grants.receiver_key())["request_id"]
    assert target.fence(request_id) is None
    assert target.at_target("demo:onestatement")[COMMUNITY_C]["rows"] > 0

    # A lower generation than the fence holds: refused as stale, nothing recorded.
    lower = signed_grant("demo:onestatement", COMMUNITY_C, 1, request_id=g["request_id"], generation=2)
    with pytest.raises(said.Stale, match="generation 2 of test is fenced out: generation 3 owns"):
        backend.apply(lower)
    assert len(target.operations(g["request_id"])) == 1

    # A withdrawal raises the epoch: an older grant is refused, saying when the receiver acknowledged it.
    backend.withdraw(grants.sign({"kind": "withdrawal", "request_id": g["request_id"], "epoch": 1, "issued_at": "x"}))
    fenced = target.fence(g["request_id"])
    assert fenced is not None
    older = signed_grant("demo:onestatement", COMMUNITY_C, 1, request_id=g["request_id"])
    with pytest.raises(said.Revoked, match=f"epoch 1, acknowledged {fenced['epoch_raised_at']:%Y-%m-%d %H:%M:%S} UTC"):
        backend.apply(older)


def test_evidence_under_a_key_registered_since_the_worker_read_the_registrations_is_believed(cmd) -> None:
    """A worker keeps the registrations it read for a while (`targets.for_target`). The receiver's key
    registered since by another process (a write the model's signals do not see here) is read again
    when the evidence names it: the stage completes; it is never left "effect unknown"."""
    from deletions import targets
    from deletions.models import TargetSystem
    from receiver import signing
    from tests.conftest import submit_and_approve

    real = {signing.key_id(): signing.public_key()}
    registered = TargetSystem.objects.get(prefix="demo:")
    targets.register(name=registered.name, prefix="demo:", base_url=registered.base_url, keys={"old-key": "A" * 43})
    targets.for_target("demo:any")  # this process now holds the registration without the receiver's key
    TargetSystem.objects.filter(prefix="demo:").update(keys={"old-key": "A" * 43, **real})  # another process's
    req = submit_and_approve()
    ran = cmd("run_deletion", str(req.id), "--next-step")
    assert ran.code == 0, ran.err
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    assert gate.status == "completed" and gate.metadata_json["result"]["receipt"], gate.metadata_json
    assert not DeletionRequest.objects.get(id=req.id).alarms.filter(kind="effect_unknown").exists()
