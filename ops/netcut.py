"""Test machinery, like the crash points: a receiver started as its own process, and a network
between it and the back-office that can be cut for a moment (`manage.py chaos`, the bench,
tests/receiver)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def receiver_url(port: int) -> str:
    """The URL of a receiver (or a proxy in front of one) this run serves on a port of this machine."""
    return f"http://127.0.0.1:{port}/receiver/v1/"


def serve_receiver(
    port: int, database_url: str, stderr: IO[Any] | int | None = None, public_url: str = "", **env: str
) -> subprocess.Popen[str]:
    """`python -m receiver serve` on this port against this database, checking this back-office's key,
    returned once it listens (it prints its URL then); it takes calls signed for `public_url` (the URL
    it is registered under: by default its own port's; a proxy's when one is in front). `env` adds to
    its settings."""
    from core import grants

    environ = {k: v for k, v in os.environ.items() if not k.startswith(("EMBEDDED_PG", "DJANGO_SETTINGS"))}
    environ.update(
        RECEIVER_DATABASE_URL=database_url,
        RECEIVER_BACKOFFICE_KEY=grants.public_key(),
        RECEIVER_PUBLIC_URL=public_url or receiver_url(port),
        PYTHONUNBUFFERED="1",
    )
    environ.update(env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "receiver", "serve", "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT, env=environ, stdout=subprocess.PIPE, stderr=stderr, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("Receiver: http://"):
        proc.kill()
        proc.wait()
        proc.stdout.close()
        raise RuntimeError(f"the receiver did not start on port {port}: {line.strip() or proc.returncode}")
    return proc


def stop(proc: subprocess.Popen[str] | None) -> None:
    if proc is None:
        return
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=60)
    if proc.stdout is not None:
        proc.stdout.close()


def register_started(*, name: str, prefix: str, base_url: str) -> None:
    """Register a receiver this run started itself, with the keys it declares (its own process: no
    key exchange to check)."""
    import httpx

    from deletions import targets
    from deletions.targets.http import discover

    with httpx.Client(timeout=30.0) as client:  # a loaded machine answers late, not never
        declared = discover(client, base_url, name)
    targets.register(name=name, prefix=prefix, base_url=base_url, keys=declared.keys)


class Proxy:
    """A TCP proxy between the adapter and the receiver that chaos (or a test) cuts and restores: while
    cut, every connection through it is dropped and new ones are closed at once."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.cut = threading.Event()
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = int(self.server.getsockname()[1])
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return receiver_url(self.port)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if self.cut.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:  # the receiver is down: the caller sees its connection closed
                client.close()
                continue
            self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def sever(self) -> None:
        """The network goes: live connections drop, new ones are closed at once."""
        self.cut.set()
        for s in self.open:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        self.open.clear()

    def restore(self) -> None:
        self.cut.clear()

    def close(self) -> None:
        self.sever()
        self.server.close()
