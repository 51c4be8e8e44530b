"""The reference receiver as its own process (`python -m receiver serve`) on the test's database of the
demo application (its dataset installed there once per session), registered for `demo:` in place of the
in-process mount the rest of the suite uses; it serves only the people a test enrolled (`tests.target`)."""

from __future__ import annotations

import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from core.store import connection_url
from deletions import targets
from ops import netcut
from ops.netcut import Proxy, free_port  # noqa: F401  (the tests' receiver, as chaos runs it)
from samples.demo.inprocess import DATASET
from wire import keys

DEMO = str(DATASET)


@dataclass
class Receiver:
    """A receiver process (started again on the same port by `start`), signing with `key`."""

    port: int
    key: str = field(default_factory=lambda: keys.b64(secrets.token_bytes(32)))
    key_id: str = "receiver-1"
    proc: subprocess.Popen[str] | None = None
    log: Any = None  # its stderr, a file made by the first start

    public_url: str = ""  # the URL it takes calls signed for, when not its own port's (a proxy's)

    @property
    def url(self) -> str:
        return netcut.receiver_url(self.port)

    def public(self) -> str:
        return keys.public_text(keys.private(keys.unb64(self.key)))

    def start(self, **env: str) -> Receiver:
        if self.proc is not None:
            self.stop()  # (the one before, stopped or dead: its pipe closed)
        self.log = self.log or tempfile.TemporaryFile()  # noqa: SIM115 (closed by the fixture)
        self.proc = netcut.serve_receiver(
            self.port,
            connection_url("target"),
            stderr=self.log,
            public_url=self.public_url,
            **{"RECEIVER_SIGNING_KEY": self.key, "RECEIVER_KEY_ID": self.key_id, "RECEIVER_DATASET": DEMO, **env},
        )
        return self

    def logged(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> None:
        netcut.stop(self.proc)

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
