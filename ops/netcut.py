"""Test machinery, like the crash points: a network between the back-office and a receiver that can be
cut for a moment (`manage.py chaos`, tests/receiver)."""

from __future__ import annotations

import contextlib
import socket
import threading


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
        return f"http://127.0.0.1:{self.port}/receiver/v1/"

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
