"""python -m receiver serve [--bind HOST:PORT]   the receiver's HTTP service (`/receiver/v1/`) for RECEIVER_DATASET
python -m receiver key                          its key id and public key, to register it in the back-office
python -m receiver check DATASET [--rehearse N]  check a dataset file against the application's database,
                                                 and run its deletion for N real people, rolled back
python -m receiver install DATASET [--rehearse N]  install the receiver for it in that database (schema
                                                 `receiver`, its own tables too), after rehearsing 3 people (or N)
"""

from __future__ import annotations

import os
import re
import socket
import sys
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer, make_server


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True

    def get_request(self) -> Any:
        """Each answer leaves at once: no Nagle delay behind the client's delayed acknowledgement."""
        conn, address = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, address


class _Answer(ServerHandler):
    http_version = "1.1"


class _Body:
    """A request's body as the application reads it: at most its Content-Length (`wsgi.input`), so a
    read never waits on the next request's bytes; `left` says whether it was read whole."""

    def __init__(self, rfile: Any, length: int | None) -> None:
        self.rfile, self.left = rfile, length

    def read(self, size: int | None = -1) -> bytes:
        return self._take(self.rfile.read, size)

    def readline(self, size: int | None = -1) -> bytes:
        return self._take(self.rfile.readline, size)

    def readlines(self, hint: int = -1) -> list[bytes]:
        return list(iter(self.readline, b""))

    def __iter__(self) -> Any:
        return iter(self.readline, b"")

    def _take(self, read: Any, size: int | None) -> bytes:
        if not self.left or size == 0:  # read whole, or its length unknown (then nothing is read)
            return b""
        data = bytes(read(self.left if size is None or size < 0 else min(size, self.left)))
        self.left = self.left - len(data) if data else None  # (the connection ended: no more is coming)
        return data


class _Quiet(WSGIRequestHandler):
    """One thread per connection, kept between calls (HTTP/1.1; every answer has a Content-Length),
    so a caller's calls share a thread and its database connection.

    Only what never reaches the application is refused here, in the protocol's JSON (`send_error`):
    bytes that are not an HTTP/1.x request (400, or 505 for HTTP/2), a request line over
    `MAX_REQUEST_LINE` (414), headers over `MAX_HEADER_BYTES` or too many (431), a body framed other than
    by one Content-Length (400: wsgiref reads no chunked body). A connection whose
    request body was not read whole (refused before it was read, or its length unknown) is closed after
    the answer, so its bytes are never read as the next request."""

    protocol_version = "HTTP/1.1"

    def handle(self) -> None:
        from django.db import connections

        try:
            self.close_connection = True
            self.handle_one_request()
            while not self.close_connection:
                self.handle_one_request()
        finally:
            connections.close_all()  # this thread's, as its connection ends

    def handle_one_request(self) -> None:
        from receiver import protocol

        # (read by send_error before a request line is parsed; parse_request sets them)
        self.command, self.requestline, self.request_version = "", "", "HTTP/1.1"
        self.raw_requestline = self.rfile.readline(protocol.MAX_REQUEST_LINE + 1)
        if not self.raw_requestline:
            self.close_connection = True
            return
        if len(self.raw_requestline) > protocol.MAX_REQUEST_LINE:
            self.send_error(414, f"the request line is over {protocol.MAX_REQUEST_LINE} bytes")
            return
        if not self.raw_requestline.strip():
            self.send_error(400, "an HTTP/1.x request line was expected")
            return
        if not self.parse_request():
            return
        if self.request_version == "HTTP/0.9":
            self.send_error(400, "this receiver speaks HTTP/1.x")
            return
        if sum(len(k) + len(v) + 4 for k, v in self.headers.items()) > protocol.MAX_HEADER_BYTES:
            self.send_error(431, f"the request's headers are over {protocol.MAX_HEADER_BYTES} bytes")
            return
        lengths = self.headers.get_all("Content-Length") or []
        if len(lengths) > 1 or "Transfer-Encoding" in self.headers:  # (framing this server would read wrong)
            self.send_error(400, "a request gives one Content-Length and no Transfer-Encoding")
            return
        length = lengths[0] if lengths else "0"  # (none: no body)
        readable = length.isascii() and length.isdigit() and len(length) <= 18
        body = _Body(self.rfile, int(length) if readable else None)  # (else the application refuses it)
        answer = _Answer(body, self.wfile, self.get_stderr(), self.get_environ(), multithread=True)  # type: ignore[arg-type]
        answer.request_handler = self  # type: ignore[attr-defined]
        answer.run(self.server.get_app())  # type: ignore[attr-defined]
        if body.left != 0:
            self.close_connection = True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Every refusal made here is the protocol's: one JSON line `{"error": ...}`, then the connection closes."""
        import json

        self.close_connection = True
        if self.request_version == "HTTP/0.9":  # (not known yet: the answer still has its status line)
            self.request_version = "HTTP/1.1"
        short = self.responses.get(code, ("Error",))[0]
        data = json.dumps({"error": message or short}, separators=(",", ":")).encode()
        self.send_response(code, short)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # one line a call at debug, not on stderr
        import logging

        logging.getLogger("receiver.access").debug(format, *args)


BIND = re.compile(r"(?P<host>[^\s:]*|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})")


def bind_address(text: str) -> tuple[str, int] | None:
    """HOST:PORT (the host may be empty: 127.0.0.1) with a port 0-65535 (0: any free one); else None."""
    found = BIND.fullmatch(text)
    if found is None or int(found["port"]) > 65535:
        return None
    return found["host"].strip("[]") or "127.0.0.1", int(found["port"])


def serve(host: str, port: int) -> None:
    from receiver import protocol
    from receiver.http import served

    server = make_server(host, port, served, server_class=_Server, handler_class=_Quiet)
    print(f"Receiver: http://{host}:{server.server_port}{protocol.PREFIX}", flush=True)
    server.serve_forever()


def _first_line(exc: BaseException) -> str:
    said = str(exc).strip()
    return f"{type(exc).__name__}: {said.splitlines()[0]}" if said else type(exc).__name__


def main(argv: list[str]) -> int:
    """Run one command; every refusal is one line on stderr and a non-zero exit: 2 for arguments this
    program does not take, 3 for a database whose schema or installed dataset does not match, 1 for
    the rest (settings, keys, the database, the address)."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "receiver.settings"  # its own, whatever the shell says
    import django
    from django.core.exceptions import ImproperlyConfigured

    try:
        django.setup()
    except ImproperlyConfigured as exc:  # (a malformed RECEIVER_DATABASE_URL, a number that is not, ...)
        print(f"refused: {str(exc).strip().splitlines()[0]}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"refused: the receiver's settings do not read ({_first_line(exc)})", file=sys.stderr)
        return 1
    from django.db import Error as DatabaseError

    from receiver import signing
    from receiver.dataset.compile import Refused as DatasetRefused

    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    rehearse: int | None = None
    if command in ("check", "install"):
        if len(rest) == 3 and rest[1] == "--rehearse" and rest[2].isdigit() and 0 <= int(rest[2]) <= 1000:
            rehearse, rest = int(rest[2]), rest[:1]
        if len(rest) != 1 or rest[0].startswith("-"):
            print(
                f"refused: {command} takes one dataset file: python -m receiver {command} DATASET [--rehearse N] "
                "(N people, 0-1000)",
                file=sys.stderr,
            )
            return 2
    given = rest[1] if len(rest) == 2 and rest[0] == "--bind" else "" if rest else "127.0.0.1:8100"
    bind = bind_address(given)
    if command == "serve" and bind is None:
        print("refused: serve takes --bind HOST:PORT only, a port 0-65535 (default 127.0.0.1:8100)", file=sys.stderr)
        return 2
    if command not in ("serve", "check", "install", "key"):
        print(f"refused: unknown command {command!r} (python -m receiver --help lists them)", file=sys.stderr)
        return 2
    try:
        if command in ("serve", "key"):
            signing.check_keys()
        if command == "serve":
            from receiver.dataset import backend

            try:
                backend.check_installed()
            except DatasetRefused as refused:
                print(refused, file=sys.stderr)
                return 3
            assert bind is not None
            try:
                serve(*bind)
            except (OSError, OverflowError) as exc:
                said = getattr(exc, "strerror", None) or exc
                print(f"refused: cannot listen on {given} ({said})", file=sys.stderr)
                return 1
            except KeyboardInterrupt:
                print("Receiver stopped", file=sys.stderr)
                return 0
        elif command in ("check", "install"):
            from receiver.dataset import install

            print(install.run(rest[0], write=command == "install", rehearse=rehearse))
        else:
            print(f"{signing.key_id()}={signing.public_key()}")
    except (DatasetRefused, signing.BadKey) as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    except DatabaseError as exc:
        print(
            f"refused: the receiver's database cannot be used ({_first_line(exc)}); check RECEIVER_DATABASE_URL "
            "and that the database is up",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
