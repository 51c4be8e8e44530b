"""The demo application reached only over HTTP, through the reference receiver running as its own process:
signed calls, signed evidence, and what a lost answer or a forged one means."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from django.utils import timezone

from core.authority import named
from deletions import proof, targets
from deletions.models import DeletionAlarm, DeletionRequest, StageHistory, TargetSystem
from deletions.services import deletion_approve, deletion_submit
from deletions.store import alarms
from deletions.targets.http import BadEvidence, verify_evidence
from tests import target as demo
from tests.conftest import run_command
from tests.deletions.helpers import believed, effects, recorded
from tests.receiver.conftest import Proxy, Receiver
from tests.support import force
from wire import evidence

pytestmark = [pytest.mark.django_db(transaction=True)]


def approved(target: str) -> DeletionRequest:
    demo.enroll(target)  # in the demo application: a receiver in its own process serves only who it holds
    req = deletion_submit(target=target, actor=named("operator-a"), reason="over HTTP")
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    return req


def test_a_deletion_runs_through_the_receiver_process_and_its_proof_carries_the_signed_evidence(
    receiver: Receiver,
) -> None:
    req = approved("demo:over-http")
    ran = run_command("run_deletion", str(req.id))
    assert ran.code == 0, ran.err
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    stages = list(StageHistory.objects.filter(request_id=req.id).order_by("finished_at"))
    assert len(stages) == 6 and all(s.status == "completed" for s in stages)
    # Their own records last (nothing of theirs there in the demo), in whose effect the walk ran.
    assert (stages[-1].stage, str(stages[-1].target_community_id)) == ("purge_db", demo.OWN_RECORDS)
    assert "catalog_walk" in stages[-1].metadata_json["result"]
    for s in stages:  # each result is the receiver's record, signed by its key, never what the worker sent
        assert believed(s.metadata_json["result"]) == recorded(s.operation_id)
        assert evidence.key_id(s.metadata_json["result"]["receipt"]) == receiver.key_id
    assert len(effects(req.id)) == 6
    sealed = proof.of(req.id, now=timezone.now())
    assert all(s["evidence"]["receipt"] for s in sealed["record"]["stages"])
    assert any("signed by the receiver (key receiver-1)" in line for line in proof.lines(sealed))


def test_calls_not_signed_by_the_back_office_or_replayed_are_refused_and_change_nothing(receiver: Receiver) -> None:
    req = approved("demo:unsigned")
    body = json.dumps({"request_id": str(req.id)}).encode()
    plain = httpx.post(receiver.url + "fence", content=body, headers={"Content-Type": "application/json"})
    assert plain.status_code == 401 and "signature" in plain.json()["error"]
    # A call the back-office signed, captured and sent again: the nonce was taken the first time.
    signed = targets.for_target("demo:unsigned").signed("fence", {"request_id": str(req.id)})  # type: ignore[attr-defined]
    with httpx.Client() as other:
        first = other.send(signed)
        again = other.send(signed)
    assert first.status_code == 200 and first.json() == {"generation": 0}
    assert again.status_code == 401 and "replayed" in again.json()["error"]
    # Signed with another key than the one the receiver was given: refused.
    wrong = httpx.post(
        receiver.url + "fence",
        content=body,
        headers={
            "Content-Type": "application/json",
            "Signature-Input": 'sig=("@method");created=1;keyid="stranger"',
            "Signature": "sig=:AAAA:",
        },
    )
    assert wrong.status_code == 401
    assert not effects(req.id)


def test_evidence_whose_signature_does_not_verify_is_never_saved_and_raises_an_integrity_alarm(
    receiver: Receiver,
) -> None:
    impostor = Receiver(port=receiver.port).public()  # registered: a key the receiver does not sign with
    receiver.register(**{receiver.key_id: impostor})
    req = approved("demo:forged")
    run_command("run_deletion", str(req.id))
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    assert gate.status != "completed" and "result" not in gate.metadata_json
    assert recorded(gate.operation_id) is not None  # applied there: the answer could not be believed
    assert "effect unknown" in (DeletionRequest.objects.get(id=req.id).last_error or "")
    # The next run looks it up: the lookup's evidence does not verify either, so nothing is believed.
    force(DeletionRequest.objects.filter(id=req.id), next_attempt_at=timezone.now())
    run_command("run_deletion", str(req.id))
    gate = StageHistory.objects.get(id=gate.id)
    assert gate.status != "completed" and "result" not in gate.metadata_json
    alarm = DeletionAlarm.objects.get(request_id=req.id, kind=alarms.INTEGRITY)
    assert "does not verify" in alarm.message
    assert len(effects(req.id)) == 1  # applied once, never resent


def test_a_receiver_killed_between_its_commit_and_its_answer_leaves_the_effect_unknown_then_settled_once(
    receiver: Receiver,
) -> None:
    receiver.start(CRASH_AT="receiver-after-commit")
    req = approved("demo:killed-receiver")
    run_command("run_deletion", str(req.id))
    # Its serving process was killed mid-call (gunicorn's worker); the server starts another at once.
    assert "was sent SIGKILL" in receiver.logged(), receiver.logged()
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    assert recorded(gate.operation_id) is not None and "result" not in gate.metadata_json
    assert "effect unknown" in (DeletionRequest.objects.get(id=req.id).last_error or "")
    receiver.start()  # the same receiver again, on the same port, without the crash point
    force(DeletionRequest.objects.filter(id=req.id), next_attempt_at=timezone.now())
    ran = run_command("run_deletion", str(req.id))
    assert ran.code == 0, ran.err
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    gate = StageHistory.objects.get(id=gate.id)
    assert believed(gate.metadata_json["result"]) == recorded(gate.operation_id)  # settled by lookup
    assert [a for _, a, _ in effects(req.id)].count("gate_user") == 1  # sent once
    assert uuid.UUID(str(gate.operation_id))


def test_a_rotated_receiver_key_keeps_old_evidence_verifiable_and_new_evidence_signed_by_the_new_key(
    receiver: Receiver,
) -> None:
    first = approved("demo:before-rotation")
    assert run_command("run_deletion", str(first.id)).code == 0
    old_key_id, old_public = receiver.key_id, receiver.public()
    rotated = Receiver(port=receiver.port, key_id="receiver-2")
    receiver.key, receiver.key_id = rotated.key, rotated.key_id
    receiver.start()  # the same receiver, restarted with its new key
    receiver.register(**{old_key_id: old_public, receiver.key_id: receiver.public()})  # the old one kept
    second = approved("demo:after-rotation")
    assert run_command("run_deletion", str(second.id)).code == 0
    registered = TargetSystem.objects.get(prefix="demo:").keys
    for req, key_id in ((first, "receiver-1"), (second, "receiver-2")):
        for s in StageHistory.objects.filter(request_id=req.id):
            assert evidence.key_id(s.metadata_json["result"]["receipt"]) == key_id
            assert verify_evidence(s.metadata_json["result"]["receipt"], registered)  # old evidence still verifies
    # Without the old key registered, the evidence it signed is no longer believed: why a rotation keeps it.
    old_receipt = StageHistory.objects.filter(request_id=first.id)[0].metadata_json["result"]["receipt"]
    with pytest.raises(BadEvidence):
        verify_evidence(old_receipt, {"receiver-2": receiver.public()})


def test_a_network_cut_refuses_the_run_before_anything_is_sent_and_the_run_completes_once_it_is_back(
    receiver: Receiver,
) -> None:
    proxy = Proxy(receiver.port)
    receiver.public_url = proxy.url  # registered there: the calls are signed for the proxy's URL
    receiver.start()
    try:
        receiver.register()
        targets.register(
            name="demo target system", prefix="demo:", base_url=proxy.url, keys={receiver.key_id: receiver.public()}
        )
        req = approved("demo:network-cut")  # (submitted and approved over the proxy while it is up)
        proxy.sever()
        cut = run_command("run_deletion", str(req.id))
        assert cut.code != 0 and "did not answer" in cut.err and "nothing was claimed or sent" in cut.err
        assert not effects(req.id) and not StageHistory.objects.filter(request_id=req.id).exists()
        proxy.restore()
        back = run_command("run_deletion", str(req.id))
        assert back.code == 0, back.err
        assert DeletionRequest.objects.get(id=req.id).status == "completed"
        ops = [op for op, _, _ in effects(req.id)]
        assert len(ops) == len(set(ops)) == 6  # each effect once
    finally:
        proxy.close()


def test_the_receiver_serves_its_protocol_as_a_valid_openapi_document_and_declares_its_capabilities(
    receiver: Receiver,
) -> None:
    from openapi_spec_validator import validate

    document = httpx.get(receiver.url + "openapi.json").json()
    validate(document)
    assert {p.rsplit("/", 1)[-1] for p in document["paths"]} >= {"inventory", "preview", "fence", "apply", "lookup"}
    declared = httpx.get(receiver.url).json()
    assert declared["version"] == 1 and declared["keys"] == {receiver.key_id: receiver.public()}
    assert declared["capabilities"] == {
        "fences_stale_owners": True,
        "checks_expected_version": True,
        "idempotent_per_operation": True,
        "lookups_can_lag": True,
    }


def test_a_not_found_or_an_acknowledgement_the_receiver_did_not_sign_is_not_believed(receiver: Receiver) -> None:
    """Each lets the back-office conclude something (resend an operation; stop pushing a withdrawal): each
    is believed only signed by the registered key, and about what was asked."""
    from core import grants
    from deletions.targets.base import NotFound, TargetRefused

    asked = uuid.uuid4()
    adapter = targets.for_target("demo:anyone")
    assert isinstance(adapter.lookup(asked), NotFound)  # signed by the registered key: believed
    withdrawal = grants.sign({"kind": "withdrawal", "request_id": str(uuid.uuid4()), "epoch": 1, "issued_at": "now"})
    assert adapter.withdraw(withdrawal) == 1
    receiver.register(**{receiver.key_id: Receiver(port=receiver.port).public()})  # another key registered
    adapter = targets.for_target("demo:anyone")
    with pytest.raises(TargetRefused) as refused:
        adapter.lookup(uuid.uuid4())
    assert refused.value.kind == "tampered" and "nothing was believed" in refused.value.message
    with pytest.raises(BadEvidence):
        adapter.withdraw(withdrawal)


def test_register_target_registers_a_receiver_that_answers_with_one_of_the_keys_given_and_refuses_otherwise(
    receiver: Receiver,
) -> None:
    key = f"{receiver.key_id}={receiver.public()}"
    other = f"{receiver.key_id}={Receiver(port=receiver.port).public()}"
    args = ["--name", "again", "--prefix", "again:", "--url", receiver.url]
    wrong = run_command("register_target", *args, "--key", other, "--wait", "1", token=False)
    assert wrong.code == 2 and "signs with key 'receiver-1', which no key given matches" in wrong.err
    nobody = run_command(
        "register_target", *args[:4], "--url", "http://127.0.0.1:9/receiver/v1/", "--key", key, "--wait", "0.5",
        token=False,
    )  # fmt: skip
    assert nobody.code == 2 and "no receiver answers at http://127.0.0.1:9/receiver/v1/" in nobody.err
    assert not TargetSystem.objects.filter(prefix="again:").exists()
    done = run_command("register_target", *args, "--key", key, "--key", other.replace("receiver-1", "old"), token=False)
    assert done.code == 0 and "again: targets are deleted through again at" in done.out, done.err
    assert TargetSystem.objects.get(prefix="again:").keys == {
        "receiver-1": receiver.public(),
        "old": other.split("=")[1],
    }


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["check"], "refused: check takes one dataset file"),
        (["install", "a.yaml", "b.yaml"], "refused: install takes one dataset file"),
        (["serve", "--bind", "127.0.0.1:x"], "refused: serve takes --bind HOST:PORT only"),
        (["serve", "--port", "8100"], "refused: serve takes --bind HOST:PORT only"),
        (["nonsense"], "refused: unknown command 'nonsense'"),
    ],
)
def test_the_receiver_command_refuses_bad_arguments_in_one_line(argv: list[str], said: str) -> None:
    import subprocess
    import sys

    from tests.conftest import ROOT

    ran = subprocess.run(
        [sys.executable, "-m", "receiver", *argv], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 2 and ran.stderr.startswith(said), ran.stderr


def test_an_operation_sent_again_is_answered_with_the_same_signed_evidence_and_applied_once(
    receiver: Receiver,
) -> None:
    """Replay, not reject: the receiver answers a second apply of an operation with its first record,
    signed to the same text, and applies nothing more."""
    from django.db import connections

    req = approved("demo:sent-twice")
    assert run_command("run_deletion", str(req.id)).code == 0
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    with connections["target"].cursor() as cur:
        cur.execute('SELECT "grant" FROM receiver.receiver_operations WHERE operation_id = %s', [gate.operation_id])
        (grant,) = cur.fetchone()
    before = effects(req.id)
    again = targets.for_target("demo:sent-twice").apply(grant)
    assert again["receipt"] == gate.metadata_json["result"]["receipt"]  # the same signed text
    assert again == gate.metadata_json["result"] and effects(req.id) == before
