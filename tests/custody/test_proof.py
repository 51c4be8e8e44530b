"""The proof of a case: signed, verifiable by `deletion_record --verify` (exit 0 intact, 1 when any
byte changed), readable by approvers, auditors and superusers only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from core import proofs
from deletions import proof, worker
from deletions.models import DeletionRequest, Status
from tests.conftest import submit_and_approve

pytestmark = pytest.mark.django_db


@pytest.fixture
def completed() -> DeletionRequest:
    req = submit_and_approve("demo:proven")
    worker.run(req.id, executor_id="worker-proof")
    req = DeletionRequest.objects.get(id=req.id)
    assert req.status == Status.COMPLETED
    return req


def auditor() -> User:
    user = User.objects.create_user("auditor-1", is_staff=True)
    user.groups.add(Group.objects.get(name="auditors"))
    return user


def test_the_proof_names_what_was_asked_approved_done_and_seen_at_the_target(completed, cmd, tmp_path) -> None:
    auditor()
    ran = cmd("deletion_record", str(completed.id), "--by", "auditor-1", "--json")
    assert ran.code == 0, ran.err
    proof = json.loads(ran.out)
    r = proof["record"]
    assert r["asked"]["target"] == "demo:proven" and r["asked"]["requested_by"] == "operator-a"
    assert r["proposal"]["digest"] == completed.inventory_digest
    assert [a["approved_by"] for a in r["approvals"]] == ["operator-b"]
    assert r["outcome"] == "completed" and r["completed_at"] == completed.completed_at.isoformat()
    operations = {s["operation_id"] for s in r["stages"]}
    assert operations == {str(o) for o in completed.stages.values_list("operation_id", flat=True)}
    purged = [s for s in r["stages"] if s["stage"] == "purge_db"]
    assert purged and all("rows_deleted" in s["evidence"] and s["attempts"] for s in purged)
    assert [d["action"] for d in r["decisions"]][:2] == ["submit", "approve"]
    assert proof["digest"] == proofs.digest(r) and proofs.verify(proof) == ""
    text = cmd("deletion_record", str(completed.id), "--by", "auditor-1")
    assert text.code == 0 and text.out.startswith(f"Proof of deletion {completed.id}: completed")
    assert "approval  by operator-b" in text.out and "digest    sha256:" in text.out
    saved = tmp_path / "proof.json"
    saved.write_text(ran.out)
    good = cmd("deletion_record", "--verify", str(saved))
    assert good.code == 0 and "intact" in good.out


def test_the_proof_fails_verification_after_any_byte_changes(completed, cmd, tmp_path) -> None:
    data = proofs.dumps(proof.of(completed.id, completed.completed_at)).encode()
    assert proofs.verify_file(data) == ""
    changed = [bytes(data[:i]) + bytes([data[i] ^ 0x01]) + bytes(data[i + 1 :]) for i in range(len(data))]
    failing = [i for i, d in enumerate(changed) if proofs.verify_file(d) == ""]
    assert failing == [], f"bytes {failing[:5]} changed and still verified"
    # A changed record with its digest recomputed fails too: only the back-office's key signs one.
    forged = json.loads(data)
    forged["record"]["asked"]["target"] = "demo:someone-else"
    forged["digest"] = proofs.digest(forged["record"])
    assert proofs.verify(forged) == "the signature is not the back-office's over this digest"
    bad = Path(tmp_path / "bad.json")
    bad.write_bytes(changed[len(data) // 2])
    ran = cmd("deletion_record", "--verify", str(bad))
    assert ran.code == 1 and "NOT intact" in ran.err


def test_only_approvers_auditors_and_superusers_read_a_proof(completed, cmd, client) -> None:
    support = User.objects.create_user("support-8", is_staff=True)
    support.groups.add(Group.objects.get(name="support (read-only)"))
    refused = cmd("deletion_record", str(completed.id), "--by", "support-8")
    assert refused.code == 1 and "support-8 may not read proofs" in refused.err and refused.out == ""
    page = reverse("admin:deletions_deletionrequest_proof", args=[completed.id])
    client.force_login(support)
    assert client.get(page).status_code == 403
    client.force_login(auditor())
    shown = client.get(page)
    assert shown.status_code == 200 and "Intact" in shown.content.decode()
    download = client.get(page, {"format": "json"})
    assert proofs.verify_file(download.content) == ""
    # The auditor decides nothing: every action of the case is disabled for them.
    case_page = client.get(reverse("admin:deletions_deletionrequest_change", args=[completed.id])).content.decode()
    assert 'id="action-proof"' in case_page and 'href="' + page + '"' in case_page
    assert 'id="action-cancel" href' not in case_page and 'id="action-approve" href' not in case_page


def test_a_retirement_has_its_proof_too(cmd, tmp_path) -> None:
    assert cmd("create_workspace", "--slug", "proof-ws", "--name", "P", "--disabled").code == 0
    ran = cmd("request_retirement", "--workspace", "proof-ws", "--requested-by", "operator-a", "--reason", "gone",
              "--confirm", "proof-ws")  # fmt: skip
    rid = json.loads(ran.out)["id"]
    auditor()
    out = cmd("retirement_record", rid, "--by", "auditor-1", "--json")
    assert out.code == 0, out.err
    record = json.loads(out.out)["record"]
    assert record["asked"]["workspace"] == "proof-ws" and record["notices"]
    saved = tmp_path / "r.json"
    saved.write_text(out.out)
    assert cmd("retirement_record", "--verify", str(saved)).code == 0
    saved.write_text(out.out.replace("gone", "kept"))
    assert cmd("retirement_record", "--verify", str(saved)).code == 1
