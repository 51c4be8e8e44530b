"""Believe the receipt, not the row (issue 51, item 1). A completed stage's saved result is edited as
the database's superuser, past the evidence triggers (rows_deleted lowered by 7, rows_remaining 0 -> 7),
while the receiver's signed receipt beside it still says what was done: the next `health`, the case
page, `show_deletion`, the API and `deletion_record` each say what differs, one integrity alarm is
raised, and no proof is issued over it. A proof file whose evidence is edited fails `--verify`, naming
the stage, even when the back-office's own signature over the whole is made again."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse
from joserfc.jwk import OKPKey

from core import access, clock, proofs, tokens
from deletions import evidence, receipts, worker
from deletions.models import DeletionAlarm, DeletionRequest, StageHistory, Status, TargetSystem
from deletions.reading import case_view
from ops.health import beat
from tests.conftest import submit_and_approve
from tests.support import force

pytestmark = pytest.mark.django_db


def completed(target: str) -> DeletionRequest:
    req = submit_and_approve(target)
    worker.run(req.id, executor_id="worker-receipt")
    req = DeletionRequest.objects.get(id=req.id)
    assert req.status == Status.COMPLETED
    return req


def edited(req: DeletionRequest) -> tuple[StageHistory, int, int]:
    """The issue's edit of the first community's purge_db, as the table's owner with the triggers off
    (`force`): its receipt untouched. Returns the stage and the rows deleted and remaining it signed."""
    stage = req.stages.filter(stage="purge_db", status="completed").order_by("created_at", "id").first()
    assert stage is not None
    result = dict(stage.metadata_json["result"])
    signed = (result["rows_deleted"], result["rows_remaining"])
    assert signed[1] == 0 and signed[0] >= 7
    result.update(rows_deleted=signed[0] - 7, rows_remaining=7)
    assert force(StageHistory.objects.filter(id=stage.id), metadata_json={**stage.metadata_json, "result": result}) == 1
    return stage, *signed


def person(name: str, group: str) -> User:
    user = User.objects.create_user(name, is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


def open_faults(req: DeletionRequest) -> list[DeletionAlarm]:
    return list(DeletionAlarm.objects.filter(request=req, kind="integrity_fault", resolved_at__isnull=True))


def test_an_edited_result_is_reported_by_health_the_case_page_and_deletion_record_and_no_proof_is_issued(
    cmd, client
) -> None:
    beat(clock.now())
    req = completed("demo:receipt-edited")
    auditor, support = person("auditor-1", "auditors"), person("support-1", "support (read-only)")
    ran = cmd("health", "--json")
    assert ran.code == 0 and json.loads(ran.out)["checks"]["evidence"]["ok"], ran.out
    stage, deleted, _ = edited(req)
    where = receipts.where("purge_db", str(stage.target_community_id), stage.operation_id)
    values = f"rows_deleted saved {deleted - 7}, signed {deleted}; rows_remaining saved 7, signed 0"

    # The next health is red, naming the case, the stage and the fields.
    ran = cmd("health", "--json")
    check = json.loads(ran.out)["checks"]["evidence"]
    assert ran.code == 1 and check["ok"] is False and check["count"] == 1, ran.out
    assert check["detail"] == (
        f"case {req.id}: {receipts.FAULT}: {where}: rows_deleted, rows_remaining differ from what the receiver signed"
    )
    assert json.loads(ran.out)["checks"]["integrity_faults"] == {"ok": False, "count": 1}

    # The case page says what differs, as an integrity fault, and shows what the receipt says.
    client.force_login(auditor)
    page = client.get(reverse("admin:deletions_deletionrequest_change", args=[req.id])).content.decode()
    fault = page.split('id="evidence-fault"')[1].split("</div>")[0]
    assert "Integrity fault: the saved evidence does not match its receipt." in fault
    assert f"{where}: {values}" in fault
    table = page.split('id="stage-table"')[1].split("</table>")[0]
    assert "rows remaining: 7" not in table and f"rows deleted: {deleted}; rows remaining: 0" in table
    assert table.count("the saved copy differs from this receipt") == 1
    # Support sees that it differs, not the values (no evidence for them).
    client.force_login(support)
    page = client.get(reverse("admin:deletions_deletionrequest_change", args=[req.id])).content.decode()
    assert "rows_deleted, rows_remaining differ from what the receiver signed" in page and values not in page

    # deletion_record refuses in one line naming the stage and the fields: no proof is issued.
    ran = cmd("deletion_record", str(req.id), "--by", "auditor-1", "--json")
    assert ran.code == 1 and ran.out == "", ran.out
    assert (
        ran.err == (f"no proof of deletion {req.id} is issued: {receipts.FAULT}: {where}: {values}")
        and "\n" not in ran.err.strip()
    )
    client.force_login(auditor)
    proof_page = client.get(reverse("admin:deletions_deletionrequest_proof", args=[req.id]))
    assert proof_page.status_code == 409 and values in proof_page.content.decode()

    # show_deletion and the API's case read say it too, and show what the receipt says.
    shown = cmd("show_deletion", str(req.id), "--by", "auditor-1")
    assert shown.code == 0 and f"INTEGRITY FAULT: {receipts.FAULT}: {where}: {values}" in shown.out
    assert "'rows_remaining': 7" not in shown.out and "'rows_remaining': 0" in shown.out
    answer = client.get(
        f"/api/v1/deletions/{req.id}",
        HTTP_AUTHORIZATION=f"Bearer {tokens.issue(auditor, name='read', scope='read')}",
    )
    assert answer.status_code == 200, answer.content
    data = answer.json()
    assert [f["evidence"] for f in data["evidence_faults"]] == [f"{where}: {values}"]
    believed = next(s for s in data["stages"] if s["id"] == str(stage.id))
    assert believed["believed"] == receipts.MISMATCH
    assert (believed["evidence"]["rows_deleted"], believed["evidence"]["rows_remaining"]) == (deleted, 0)
    as_support = case_view(req.id, lens=access.Lens.of(support), now=clock.now())
    assert as_support["evidence_faults"][0]["evidence"] is None  # withheld: the values are evidence
    assert as_support["evidence_faults"][0]["fault"].endswith("differ from what the receiver signed")

    # Raised once, however many reads found it.
    (alarm,) = open_faults(req)
    assert (
        alarm.message == f"{receipts.FAULT}: {where}: rows_deleted, rows_remaining differ from what the receiver signed"
    )


def test_a_proof_whose_evidence_is_edited_fails_verify_naming_the_stage_even_signed_again(cmd, tmp_path) -> None:
    req = completed("demo:receipt-proof")
    person("auditor-1", "auditors")
    ran = cmd("deletion_record", str(req.id), "--by", "auditor-1", "--json")
    assert ran.code == 0, ran.err
    proof = json.loads(ran.out)
    record = proof["record"]
    # The proof carries the receiver's public key for the key id its receipts name, and each stage's
    # evidence is what its receipt says, with the receipt.
    registered = TargetSystem.objects.get(prefix="demo:").keys
    assert record["receivers"] == {"receiver-1": registered["receiver-1"]}
    assert all(s["believed"] == receipts.SIGNED and "receipt" in s["evidence"] for s in record["stages"])
    intact = tmp_path / "proof.json"
    intact.write_text(ran.out)
    assert cmd("deletion_record", "--verify", str(intact)).code == 0

    def forged(change: Any, named: str = "purge_db") -> str:
        """The proof with `change` made to its record, sealed again by the back-office's own key: its
        signature over the whole is good, so only the receipts can catch the change."""
        r = json.loads(json.dumps(record))
        stage = next(s for s in r["stages"] if s["stage"] == "purge_db")
        change(r, stage)
        again = proofs.seal(r, clock.now())
        assert proofs.verify(again) == ""  # the back-office's signature alone would call it intact
        path = tmp_path / "forged.json"
        path.write_text(proofs.dumps(again))
        ran = cmd("deletion_record", "--verify", str(path))
        assert ran.code == 1 and "NOT intact" in ran.err
        first = next(s for s in r["stages"] if s["stage"] == named)  # the first stage the check finds wrong
        where = receipts.where(named, first["community_id"], first["operation_id"])
        assert f"stage {where}: its evidence is not what its receipt says: " in ran.err
        return ran.err.split("its receipt says: ")[1]

    def lowered(r: dict[str, Any], stage: dict[str, Any]) -> None:
        stage["evidence"].update(rows_deleted=stage["evidence"]["rows_deleted"] - 7, rows_remaining=7)

    deleted = next(s for s in record["stages"] if s["stage"] == "purge_db")["evidence"]["rows_deleted"]
    said = forged(lowered)
    assert said.strip() == f"rows_deleted saved {deleted - 7}, signed {deleted}; rows_remaining saved 7, signed 0"
    # The receipt taken away, or the receiver's key the proof carries swapped for another: it does not verify.
    assert forged(lambda r, stage: stage["evidence"].pop("receipt")).startswith("it has no receipt")
    another = OKPKey.generate_key("Ed25519").as_dict(private=False)["x"]
    swapped = forged(lambda r, stage: r.update(receivers={"receiver-1": another}), "gate_user")
    assert swapped.startswith("its receipt does not verify")


def test_health_sweeps_past_the_newest_cases_to_an_edit_anywhere(cmd) -> None:
    """The newest cases' stages are checked at every call; the others by a rolling cursor through the
    stages' keys, a window a call: an edit anywhere is found within one pass, and raised once."""
    req = completed("demo:receipt-swept")
    stage, _, _ = edited(req)
    with_results = StageHistory.objects.filter(metadata_json__has_key="result").count()
    evidence._cursor["after"] = evidence.LOWEST
    calls, found = 0, list[evidence.Fault]()
    while not found:
        calls += 1
        assert calls <= with_results // 2 + 1, "a whole pass went by without finding the edit"
        swept = evidence.sweep(clock.now(), newest=0, window=2)
        found = [f for f in swept.faults if f.stage_id == stage.id]
    assert swept.checked <= 2
    (alarm,) = open_faults(req)
    for _ in range(with_results):  # found again at each pass: still the one alarm
        evidence.sweep(clock.now(), newest=0, window=2)
    assert open_faults(req) == [alarm]


def test_a_manual_targets_stages_are_believed_as_the_operators_record(cmd) -> None:
    """No receipt: the operator's record is the evidence, said so, never a mismatch."""
    target = "manual:vendor-crm/bob@example.com"
    req = submit_and_approve(target)
    for flags in (("--evidence", "login disabled"), ("--evidence", "12 messages gone", "--has-agents", "no")):
        assert cmd("run_deletion", str(req.id), "--executor-id", "worker-a").code == 1
        ran = cmd("record_effect", str(req.id), "--by", "operator-c", "--applied", *flags)
        assert ran.code == 0, ran.err
    assert cmd("run_deletion", str(req.id), "--executor-id", "worker-a").code == 0
    data = case_view(req.id, lens=access.Lens(frozenset(access.ROLES)), now=clock.now())
    assert {s["believed"] for s in data["stages"]} == {receipts.BY_HAND} and data["evidence_faults"] == []
    person("auditor-1", "auditors")
    ran = cmd("deletion_record", str(req.id), "--by", "auditor-1")
    assert ran.code == 0 and "recorded by an operator, no receipt: " in ran.out, ran.err
    assert not open_faults(DeletionRequest.objects.get(id=req.id))
