"""A receiver that knows who it is and says what it did, as its own process: it takes only calls signed
for its public URL (a call signed for another receiver that shares the back-office's key is refused
there), it sweeps expired nonces beside the calls (no call waits on another's nonces), and its metrics
move by what happened."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import httpx
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from core.store import connection_url
from deletions import targets
from deletions.models import DeletionRequest, StageHistory
from tests.conftest import run_command
from tests.receiver.conftest import Receiver, free_port
from tests.receiver.test_receiver_edges import rows_everywhere
from tests.receiver.test_receiver_process import approved
from wire import evidence

pytestmark = [pytest.mark.django_db(transaction=True)]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def other(receiver: Receiver) -> Iterator[Receiver]:
    """A second receiver process on the same database, taking the same back-office key, registered nowhere."""
    r = Receiver(port=free_port()).start()
    yield r
    r.stop()
    if r.log is not None:
        r.log.close()


def test_a_call_signed_for_one_receiver_is_refused_by_another_that_takes_the_same_key(
    receiver: Receiver, other: Receiver
) -> None:
    call = targets.for_target("demo:anyone").signed("fence", {"request_id": str(uuid4())})  # type: ignore[attr-defined]
    assert str(call.url) == receiver.url + "fence"
    before = rows_everywhere()
    with httpx.Client() as client:
        # Replayed at the other receiver as captured (its Host still the first's), then as sent to it.
        as_captured = httpx.Request("POST", other.url + "fence", headers=call.headers, content=call.content)
        assert as_captured.headers["host"] == f"127.0.0.1:{receiver.port}"
        headers = {k: v for k, v in call.headers.items() if k != "host"}
        readdressed = httpx.Request("POST", other.url + "fence", headers=headers, content=call.content)
        for replayed in (as_captured, readdressed):
            refused = client.send(replayed)
            assert refused.status_code == 401, refused.text
            assert refused.json()["error"].startswith("call refused: its signature does not verify"), refused.text
        assert rows_everywhere() == before  # not its nonce, not a fence: nothing written there
        taken = client.send(call)  # the same call where it was signed for: its nonce was never taken
    assert taken.status_code == 200 and taken.json() == {"generation": 0}
    assert rows_everywhere()["receiver.receiver_call_nonces"] == before["receiver.receiver_call_nonces"] + 1


def _nonces(*rows: tuple[str, str]) -> None:
    """Insert nonces kept until each given interval from now (negative: expired), committed."""
    with psycopg.connect(connection_url("target"), autocommit=True) as conn:
        for nonce, kept in rows:
            conn.execute(
                "INSERT INTO receiver.receiver_call_nonces (nonce, kept_until) VALUES (%s, now() + %s::interval)",
                [nonce, kept],
            )


def _kept() -> set[str]:
    with psycopg.connect(connection_url("target"), autocommit=True) as conn:
        return {n for (n,) in conn.execute("SELECT nonce FROM receiver.receiver_call_nonces").fetchall()}


def test_expired_nonces_are_swept_beside_the_calls_and_the_kept_ones_stay(receiver: Receiver) -> None:
    receiver.start(RECEIVER_NONCE_SWEEP_SECONDS="1")
    expired = {f"expired-nonce-{i:04d}-{uuid4().hex[:8]}" for i in range(3)}
    _nonces(*((n, "-5 minutes") for n in expired), ("kept-nonce-" + uuid4().hex, "2 minutes"))
    deadline = time.monotonic() + 30
    while _kept() & expired and time.monotonic() < deadline:
        time.sleep(0.1)
    kept = _kept()
    assert not kept & expired, f"not swept within 30 s: {sorted(kept & expired)}"
    assert any(n.startswith("kept-nonce-") for n in kept)


def test_a_call_waits_on_no_other_calls_nonce(receiver: Receiver) -> None:
    """Another transaction holds an expired nonce's row (as a call deleting expired nonces on its path
    once did): a call still answers at once, taking only its own nonce."""
    held = "held-nonce-" + uuid4().hex
    _nonces((held, "-5 minutes"))
    adapter = targets.for_target("demo:anyone")
    with psycopg.connect(connection_url("target")) as holder:
        holder.execute("SELECT nonce FROM receiver.receiver_call_nonces WHERE nonce = %s FOR UPDATE", [held])
        started = time.monotonic()
        with httpx.Client(timeout=10) as client:
            answered = client.send(adapter.signed("fence", {"request_id": str(uuid4())}))  # type: ignore[attr-defined]
        took = time.monotonic() - started
        assert answered.status_code == 200, answered.text
        assert took < 5, f"the call waited {took:.1f} s on a nonce not its own"
        holder.rollback()


def metrics(receiver: Receiver) -> Samples:
    """The receiver's metrics, read over HTTP as Prometheus does: each sample by its name and labels."""
    answer = httpx.get(receiver.url + "metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain"), answer.text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(answer.text)
        for s in family.samples
    }


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    key = (name, frozenset(labels.items()))
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_the_receivers_metrics_move_by_what_the_deletions_it_served_did(receiver: Receiver) -> None:
    before = metrics(receiver)
    req = approved("demo:counted")
    reads: list[float] = []  # applies answered, as each read during the run saw them
    states: list[int] = []  # what its health said its database had applied, signed, at each read
    done = threading.Event()

    def applied_by_health() -> int:
        health = httpx.get(receiver.url + "health", timeout=10)
        assert health.status_code == 200 and health.json()["database"] == "reachable", health.text
        signed = evidence.verify(health.json()["state"], {receiver.key_id: receiver.public()})
        return int(signed["receiver_state"]["applied"])

    first = applied_by_health()

    def read_while_running() -> None:
        while not done.is_set():
            reads.append(metrics(receiver).get(("receiver_applied_total", frozenset({("outcome", "applied")})), 0.0))
            states.append(applied_by_health())
            done.wait(0.05)

    reader = threading.Thread(target=read_while_running)
    reader.start()
    try:
        ran = run_command("run_deletion", str(req.id))
    finally:
        done.set()
        reader.join(timeout=30)
    assert ran.code == 0, ran.err
    assert reads and reads == sorted(reads), reads  # read while it ran, never going back
    assert states and states == sorted(states) and first <= states[0], states  # its health, too
    assert applied_by_health() == first + 6  # the six effects, each newly applied once
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    adapter: Any = targets.for_target("demo:counted")
    with httpx.Client() as client:
        unsigned = client.post(receiver.url + "fence", json={"request_id": str(req.id)})
        forged = client.send(adapter.signed("apply", {"grant": "not.a.grant"}))
    assert unsigned.status_code == 401 and forged.status_code == 422, forged.text
    after = metrics(receiver)

    results = [s.metadata_json["result"] for s in StageHistory.objects.filter(request_id=req.id)]
    assert len(results) == 6
    assert moved(before, after, "receiver_calls_total", call="apply", status="200") == 6
    assert moved(before, after, "receiver_applied_total", outcome="applied") == 6
    assert moved(before, after, "receiver_applied_total", outcome="replayed") == 0
    assert moved(before, after, "receiver_apply_seconds_count", status="200") == 6
    assert moved(before, after, "receiver_apply_seconds_count", status="422") == 1
    for field, action in (("rows_deleted", "purge_db"), ("agents_removed", "purge_agents")):
        reported = sum(r.get(field, 0) for r in results)
        assert moved(before, after, "receiver_rows_changed_total", action=action) == reported
    assert sum(r.get("rows_deleted", 0) for r in results) > 0
    assert moved(before, after, "receiver_refusals_total", status="401", kind="signature") == 1
    assert moved(before, after, "receiver_refusals_total", status="422", kind=forged.json()["refused"]["kind"]) == 1
    assert moved(before, after, "receiver_calls_total", call="fence", status="401") == 1
    assert moved(before, after, "receiver_calls_total", call="metrics", status="200") == 1 + len(reads)
