"""One transaction a call at the receiver, over HTTP to the receiver in its own process: an apply's nonce
is taken in the effect's own transaction (`receiver.http._handle`), so a refused or rolled-back call
takes its nonce back, and a copy of a call running at the same time waits on the nonce's unique index.
Counted by the server itself: the rows' `xmin` (the transaction that wrote them) and its statement log."""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from django.db import connection, connections

from core import grants
from core.store import connection_url
from deletions import targets
from ops import netcut
from receiver import signing
from receiver.dataset import backend
from tests import target as demo
from tests.deletions.helpers import signed_grant
from tests.receiver.conftest import DEMO, Receiver, free_port
from tests.receiver.test_receiver_observed import metrics, moved
from tests.support import wait_for
from wire import calls

pytestmark = [pytest.mark.django_db(transaction=True)]

B, C = str(demo.COMMUNITY_B), str(demo.COMMUNITY_C)  # the demo person's communities

# Long enough that a copy held on a lock by the test waits for the test, never for a timeout.
PATIENT = {"RECEIVER_LOCK_TIMEOUT_MS": "120000", "RECEIVER_STATEMENT_TIMEOUT_MS": "120000"}


def _grant(handle: str, **changes: Any) -> str:
    """A grant of the back-office for the person's purge_db in community B, at the version kept now."""
    demo.enroll(handle)
    backend.preview(handle, [B, C])  # the approval's look: versions kept
    version = demo.at_target(handle)[B]["version"]
    return signed_grant(handle, B, version, generation=1, **changes)


def _signed(handle: str, grant: str) -> httpx.Request:
    return targets.for_target(handle).signed("apply", {"grant": grant})  # type: ignore[attr-defined]


def _nonce(request: httpx.Request) -> str:
    found = re.search(r'nonce="([^"]+)"', request.headers["Signature-Input"])
    assert found, request.headers["Signature-Input"]
    return found.group(1)


def _xmin(sql: str, key: str) -> str | None:
    with connections["target"].cursor() as cur:
        cur.execute(sql, [key])
        row = cur.fetchone()
    return str(row[0]) if row else None


def _nonce_xmin(nonce: str) -> str | None:
    return _xmin("SELECT xmin FROM receiver.receiver_call_nonces WHERE nonce = %s", nonce)


class PersonLocked:
    """The demo person's row locked FOR UPDATE on a connection of its own, as the application would hold
    it: an apply of theirs waits inside its transaction (its nonce taken) until `release`."""

    def __init__(self, handle: str) -> None:
        c = backend.compiled()
        self.conn = psycopg.connect(connection_url("target"), autocommit=False)
        self.pid = self.conn.info.backend_pid
        self.conn.execute(
            f'SELECT 1 FROM "{c.person_table}" WHERE "{c.person_pk}" = '
            f"(SELECT person_pk::{c.person_pk_type} FROM receiver.receiver_people WHERE person_key = %s) FOR UPDATE",
            [handle],
        )

    def release(self) -> None:
        self.conn.commit()
        self.conn.close()


def _blocked_by(pid: int) -> tuple[int, str] | None:
    """A backend waiting on a lock `pid` holds: its pid and statement."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT pid, query FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND %s = ANY(pg_blocking_pids(pid))",
            [pid],
        )
        row = cur.fetchone()
    return (int(row[0]), str(row[1])) if row else None


class Sent(threading.Thread):
    """One copy of a call, sent on a thread of its own; `answer` once joined."""

    def __init__(self, request: httpx.Request) -> None:
        super().__init__(daemon=True)
        self.request: httpx.Request = request
        self.answer: httpx.Response | None = None

    def run(self) -> None:
        with httpx.Client(timeout=120) as client:
            self.answer = client.send(self.request)


@pytest.fixture
def patient(receiver: Receiver) -> Receiver:
    return receiver.start(**PATIENT)


def test_two_copies_of_one_apply_at_once_the_second_waits_on_the_nonce_and_is_refused_as_replayed(
    patient: Receiver,
) -> None:
    handle = "demo:two-copies"
    grant = _grant(handle)
    request, before = _signed(handle, grant), metrics(patient)
    held = PersonLocked(handle)
    first, second = Sent(request), Sent(request)
    try:
        first.start()
        (first_pid, waits) = wait_for(lambda: _blocked_by(held.pid), timeout=60, what="the first copy in its apply")
        assert "receiver.apply" in waits, waits  # inside its transaction, its nonce taken
        second.start()
        (_, waits) = wait_for(lambda: _blocked_by(first_pid), timeout=60, what="the second copy on the nonce")
        assert "receiver_call_nonces" in waits, waits  # waiting on the nonce's unique index, nothing else
    finally:
        held.release()
    first.join(120)
    second.join(120)
    assert first.answer is not None and second.answer is not None
    assert first.answer.status_code == 200, first.answer.text
    assert second.answer.status_code == 401 and second.answer.json()["kind"] == calls.Replayed.kind
    op = grants.verify(grant, grants.receiver_key())
    assert [str(o[0]) for o in demo.operations(op["request_id"])] == [op["operation_id"]]  # applied once
    after = metrics(patient)
    assert moved(before, after, "receiver_refusals_total", status="401", kind="replayed") == 1
    assert moved(before, after, "receiver_applied_total", outcome="applied") == 1


def test_two_copies_at_once_the_second_runs_when_the_first_rolls_back_with_its_nonce(patient: Receiver) -> None:
    handle = "demo:first-rolled-back"
    grant = _grant(handle)
    request = _signed(handle, grant)
    held = PersonLocked(handle)
    first, second = Sent(request), Sent(request)
    try:
        first.start()
        (first_pid, _) = wait_for(lambda: _blocked_by(held.pid), timeout=60, what="the first copy in its apply")
        second.start()
        wait_for(lambda: _blocked_by(first_pid), timeout=60, what="the second copy on the nonce")
        with connection.cursor() as cur:  # the first copy's statement fails: its transaction rolls back whole
            cur.execute("SELECT pg_cancel_backend(%s)", [first_pid])
        first.join(120)
        # The nonce went back with it: the second copy takes it and waits where the first did.
        wait_for(lambda: _blocked_by(held.pid), timeout=60, what="the second copy in its apply")
    finally:
        held.release()
    second.join(120)
    assert first.answer is not None and second.answer is not None
    assert first.answer.status_code == 409 and "nothing changed" in first.answer.json()["retry"]["message"]
    assert second.answer.status_code == 200, second.answer.text
    op = grants.verify(grant, grants.receiver_key())
    assert [str(o[0]) for o in demo.operations(op["request_id"])] == [op["operation_id"]]  # applied once


def test_a_refused_apply_takes_its_nonce_back_and_a_copy_is_refused_again_by_the_same_check(
    receiver: Receiver,
) -> None:
    handle = "demo:refused-twice"
    stale = _grant(handle)
    demo.add_rows(handle, B, 1)  # their data moved on after the approval's look
    request = _signed(handle, stale)
    with httpx.Client() as client:
        answers = [client.send(request), client.send(request)]
    for answer in answers:  # the same refusal twice, never "replayed": the first took nothing, its nonce neither
        assert answer.status_code == 422 and answer.json()["refused"]["kind"] == "source_changed", answer.text
    assert _nonce_xmin(_nonce(request)) is None
    assert not demo.operations(grants.verify(stale, grants.receiver_key())["request_id"])


def test_an_apply_writes_its_nonce_and_its_effect_in_one_transaction(receiver: Receiver) -> None:
    handle = "demo:one-transaction"
    grant = _grant(handle)
    request = _signed(handle, grant)
    with httpx.Client() as client:
        answer = client.send(request)
    assert answer.status_code == 200, answer.text
    op = grants.verify(grant, grants.receiver_key())["operation_id"]
    written = _xmin("SELECT xmin FROM receiver.receiver_operations WHERE operation_id = %s", op)
    assert written is not None and _nonce_xmin(_nonce(request)) == written  # the same transaction wrote both


# The server's own log of a session's statements (log_statement = all): `<time> [pid] LOG:  statement: …`
# for a simple query, `… LOG:  execute <name>: …` for a prepared one; continuation lines start with a tab.
LOGGED = re.compile(r"^\S+ \S+ \S+ \[(\d+)\] LOG:  (?:statement|execute [^:]*): (.*)$")
COUNTED_ROLE = "receiver_counted"


@pytest.fixture
def counted(settings: Any) -> Iterator[Receiver]:
    """A receiver process connected as a role whose every statement the server logs, on one thread (one
    connection for its calls)."""
    settings.RECEIVER_IN_PROCESS = ""
    with connection.cursor() as cur:
        cur.execute(f"DROP ROLE IF EXISTS {COUNTED_ROLE}")
        cur.execute(f"CREATE ROLE {COUNTED_ROLE} LOGIN SUPERUSER")
        cur.execute(f"ALTER ROLE {COUNTED_ROLE} SET log_statement = 'all'")
    url = re.sub(r"^postgresql://[^@]*@", f"postgresql://{COUNTED_ROLE}@", connection_url("target"))
    r = Receiver(port=free_port())
    r.proc = netcut.serve_receiver(
        r.port,
        url,
        RECEIVER_SIGNING_KEY=r.key,
        RECEIVER_KEY_ID=r.key_id,
        RECEIVER_DATASET=DEMO,
        RECEIVER_THREADS="1",
        RECEIVER_NONCE_SWEEP_SECONDS="100000",
    )
    r.register()
    try:
        yield r
    finally:
        r.stop()
        with connection.cursor() as cur:
            cur.execute(
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE usename = %s", [COUNTED_ROLE]
            )
            cur.execute(f"DROP ROLE IF EXISTS {COUNTED_ROLE}")


def _server_log() -> tuple[str, int]:
    """The server's log file (relative to its data directory when the server writes it there) and its size."""
    with connection.cursor() as cur:
        cur.execute("SELECT coalesce(pg_current_logfile(), 'log')")
        (path,) = cur.fetchone()
        cur.execute("SELECT size FROM pg_stat_file(%s)", [path])
        (size,) = cur.fetchone()
    return str(path), int(size)


def _logged_since(path: str, offset: int) -> list[tuple[int, str]]:
    """(pid, statement) for every statement the server logged after `offset` of its log."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_read_file(%s, %s, (pg_stat_file(%s)).size - %s)", [path, offset, path, offset])
        (text,) = cur.fetchone()
    return [(int(m.group(1)), m.group(2)) for m in map(LOGGED.match, text.splitlines()) if m]


def transactions_and_round_trips(statements: list[str]) -> tuple[int, int]:
    """Transactions (a BEGIN … COMMIT or ROLLBACK block, or a statement outside one) and round trips
    (every statement, BEGIN and COMMIT included) in one session's statements, in order."""
    transactions, open_block = 0, False
    for s in statements:
        word = s.strip().split(" ", 1)[0].upper()
        if word == "BEGIN":
            open_block = True
        elif word in ("COMMIT", "ROLLBACK"):
            transactions, open_block = transactions + 1, False
        elif not open_block:
            transactions += 1
    return transactions, len(statements)


def test_one_apply_over_http_is_one_transaction_at_the_receivers_database(counted: Receiver) -> None:
    """One purge_db (not the last effect: no completeness walk) over HTTP: BEGIN, the nonce, the effect's
    bounds, the generated apply, COMMIT; no health check, no commit of its own for the nonce."""
    handle = "demo:counted-apply"
    grant = _grant(handle)
    with httpx.Client() as client:
        warm = client.send(targets.for_target(handle).signed("fence", {"request_id": str(uuid.uuid4())}))  # type: ignore[attr-defined]
        assert warm.status_code == 200, warm.text  # its one connection open, its dataset read
        path, offset = _server_log()
        answer = client.send(_signed(handle, grant))
    assert answer.status_code == 200, answer.text
    with connection.cursor() as cur:
        cur.execute("SELECT pid FROM pg_stat_activity WHERE usename = %s", [COUNTED_ROLE])
        pids = {int(pid) for (pid,) in cur.fetchall()}
    sweep = signing.SWEEP_NONCES.split(" WHERE ")[0]
    said = [s for pid, s in _logged_since(path, offset) if pid in pids and not s.startswith(sweep)]
    assert transactions_and_round_trips(said) == (1, 5), "\n".join(said)
    assert said[0] == "BEGIN" and "receiver_call_nonces" in said[1] and said[-1] == "COMMIT", "\n".join(said)


def test_no_call_checks_its_connection_first_a_broken_one_fails_its_call_and_the_next_connects_again(
    counted: Receiver,
) -> None:
    """No `SELECT 1` before a call: a connection cut since the last call fails the next call (503: the
    back-office looks its effect up), which drops it; the call after connects again."""
    adapter = targets.for_target("demo:anyone")

    def fence() -> httpx.Response:
        with httpx.Client() as client:
            return client.send(adapter.signed("fence", {"request_id": str(uuid.uuid4())}))  # type: ignore[attr-defined]

    assert fence().status_code == 200  # its one connection open
    with connection.cursor() as cur:
        cur.execute(
            "SELECT bool_and(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity WHERE usename = %s", [COUNTED_ROLE]
        )
        assert cur.fetchone()[0] is True
    failed = fence()
    assert failed.status_code == 503 and "could not reach its database" in failed.json()["error"], failed.text
    assert fence().status_code == 200
