"""The reference receiver as its own process (`python -m receiver serve`) on the test's target
database, registered for `demo:` in place of the in-process mount the rest of the suite uses."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from core import grants, keys
from core.store import connection_url
from deletions import targets
from ops.netcut import Proxy  # noqa: F401  (the proxy chaos uses, cut and restored by the tests)
from tests.conftest import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Receiver:
    """A receiver process (started again on the same port by `start`), signing with `key`."""

    port: int
    key: str = field(default_factory=lambda: keys.b64(secrets.token_bytes(32)))
    key_id: str = "receiver-1"
    proc: subprocess.Popen[str] | None = None
    log: Any = None  # its stderr, a file made by the first start

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/receiver/v1/"

    def public(self) -> str:
        return keys.public_text(keys.signing_key(self.key, "receiver"))

    def start(self, **env: str) -> Receiver:
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("EMBEDDED_PG", "DJANGO_SETTINGS"))}
        environ.update(
            DJANGO_SETTINGS_MODULE="receiver.settings",
            RECEIVER_DATABASE_URL=connection_url("target"),
            RECEIVER_SIGNING_KEY=self.key,
            RECEIVER_KEY_ID=self.key_id,
            RECEIVER_BACKOFFICE_KEY=grants.public_key(),
            PYTHONUNBUFFERED="1",
        )
        environ.update(env)
        if self.proc is not None:
            self.stop()  # (the one before, stopped or dead: its pipe closed)
        self.log = self.log or tempfile.TemporaryFile()  # noqa: SIM115 (closed by the fixture)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "receiver", "serve", "--bind", f"127.0.0.1:{self.port}"],
            cwd=ROOT,
            env=environ,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # printed once it listens
        assert line.startswith("Receiver: http://"), (line, self.logged())
        return self

    def logged(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=10)
            assert self.proc.stdout is not None
            self.proc.stdout.close()

    def register(self, **keys_by_id: str) -> None:
        targets.register(
            name="demo target system",
            prefix="demo:",
            base_url=self.url,
            keys=keys_by_id or {self.key_id: self.public()},
        )


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    """A receiver process on a free port, registered for demo:; the in-process mount is off."""
    settings.RECEIVER_IN_PROCESS = ""
    r = Receiver(port=free_port()).start()
    r.register()
    yield r
    r.stop()
    if r.log is not None:
        r.log.close()
