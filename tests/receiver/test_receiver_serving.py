"""The receiver's server under clients that send nothing or too little: idle connections hold no
thread, so hundreds of them leave every call its answer; a client that trickles a request is dropped
when its read timeout is up; a connection idle past the keep-alive time is closed."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from deletions.models import DeletionRequest
from tests.conftest import run_command
from tests.receiver.conftest import Receiver
from tests.receiver.test_receiver_process import approved

pytestmark = [pytest.mark.django_db(transaction=True)]

IDLE = 300


@contextlib.contextmanager
def idle_connections(port: int, count: int) -> Iterator[list[socket.socket]]:
    """`count` TCP connections to the receiver that send nothing, held open until the block ends."""
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        yield held
    finally:
        for s in held:
            s.close()


def still_open(s: socket.socket) -> bool:
    """Whether the receiver kept this connection open (nothing to read yet), without waiting."""
    s.setblocking(False)
    try:
        return s.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def discovery_seconds(url: str) -> float:
    """How long discovery takes to answer, on a new connection."""
    started = time.monotonic()
    answer = httpx.get(url, timeout=10)
    assert answer.status_code == 200 and answer.json()["protocol"] == "deletion-receiver", answer.text
    return time.monotonic() - started


def test_three_hundred_idle_connections_leave_a_deletion_its_calls_and_discovery_answers_within_a_second(
    receiver: Receiver,
) -> None:
    # 4 threads and a keep-alive longer than the test: the idle connections stay open throughout.
    receiver.start(RECEIVER_THREADS="4", RECEIVER_KEEPALIVE_SECONDS="600")
    req = approved("demo:among-idle-connections")
    with idle_connections(receiver.port, IDLE) as held:
        assert discovery_seconds(receiver.url) < 1.0  # (each idle one accepted and parked by now)
        # Discovery asked every 0.2 s on a new connection while the deletion runs (in this thread: its
        # command takes signals), each answer timed.
        done, waits = threading.Event(), []

        def ask() -> None:
            while not done.is_set():
                waits.append(discovery_seconds(receiver.url))
                done.wait(0.2)

        asking = threading.Thread(target=ask)
        asking.start()
        try:
            ran = run_command("run_deletion", str(req.id))
        finally:
            done.set()
            asking.join(timeout=30)
        assert ran.code == 0, ran.err + receiver.logged()
        assert DeletionRequest.objects.get(id=req.id).status == "completed"
        assert waits and max(waits) < 1.0, waits
        assert sum(still_open(s) for s in held) == IDLE  # held open the whole time, none dropped
    assert "Traceback" not in receiver.logged(), receiver.logged()


def test_a_client_trickling_a_request_is_dropped_when_its_read_timeout_is_up_and_the_others_are_answered(
    receiver: Receiver,
) -> None:
    receiver.start(RECEIVER_THREADS="2", RECEIVER_READ_TIMEOUT_SECONDS="2")
    slow = [socket.create_connection(("127.0.0.1", receiver.port), timeout=10) for _ in range(2)]
    try:
        started = time.monotonic()
        for s in slow:
            s.sendall(b"POST /receiver/v1/fen")  # a byte now and then, never the whole request
        closed: list[float] = []
        deadline = started + 20
        while len(closed) < len(slow) and time.monotonic() < deadline:
            for s in slow:
                with contextlib.suppress(OSError):
                    s.sendall(b"c")
                if s.fileno() != -1 and not still_open(s):
                    closed.append(time.monotonic() - started)
                    s.close()
            time.sleep(0.3)  # (the pace of the trickle, not a wait for the outcome)
        # Dropped (no answer: the connection ends) once 2 s passed since its first byte, not per byte.
        assert len(closed) == len(slow) and all(2.0 <= t < 8.0 for t in closed), closed
        assert discovery_seconds(receiver.url) < 1.0  # both threads free again
    finally:
        for s in slow:
            s.close()


def test_a_connection_idle_past_the_keep_alive_time_is_closed(receiver: Receiver) -> None:
    receiver.start(RECEIVER_KEEPALIVE_SECONDS="1")
    with idle_connections(receiver.port, 3) as held:
        deadline = time.monotonic() + 15
        while any(still_open(s) for s in held) and time.monotonic() < deadline:
            time.sleep(0.1)  # (polling against a deadline)
        assert not any(still_open(s) for s in held)
    assert discovery_seconds(receiver.url) < 1.0
