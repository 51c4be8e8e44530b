"""python -m receiver serve [--bind HOST:PORT]   the receiver's HTTP service (`/receiver/v1/`)
python -m receiver migrate                      create or update its tables in its database
python -m receiver key                          its key id and public key, to register it in the back-office
python -m receiver check DATASET [--rehearse N]  check a dataset file against the application's database,
                                                 and run its deletion for N real people, rolled back
python -m receiver install DATASET [--rehearse N]  install the receiver for it in that database (schema
                                                 `receiver`), after rehearsing 3 people (or N)
python -m receiver demo show|add-rows|set-agents ...   read or change the demo data as an application would
"""

from __future__ import annotations

import os
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


class _Quiet(WSGIRequestHandler):
    """One thread per connection, kept between calls (HTTP/1.1; every answer has a Content-Length),
    so a caller's calls share a thread and its database connection."""

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
        self.raw_requestline = self.rfile.readline(65537)
        if not self.raw_requestline or len(self.raw_requestline) > 65536:
            self.close_connection = True
            return
        if not self.parse_request():
            return
        answer = _Answer(self.rfile, self.wfile, self.get_stderr(), self.get_environ(), multithread=True)  # type: ignore[arg-type]
        answer.request_handler = self  # type: ignore[attr-defined]
        answer.run(self.server.get_app())  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:  # one line a call at debug, not on stderr
        import logging

        logging.getLogger("receiver.access").debug(format, *args)


def serve(bind: str) -> None:
    from receiver import protocol
    from receiver.http import served

    host, _, port = bind.rpartition(":")
    server = make_server(host or "127.0.0.1", int(port), served, server_class=_Server, handler_class=_Quiet)
    print(f"Receiver: http://{host or '127.0.0.1'}:{server.server_port}{protocol.PREFIX}", flush=True)
    server.serve_forever()


def main(argv: list[str]) -> int:
    os.environ["DJANGO_SETTINGS_MODULE"] = "receiver.settings"  # its own, whatever the shell says
    import django
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from receiver.dataset.compile import Refused as DatasetRefused

    django.setup()
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
    if (
        command == "serve"
        and rest
        and (rest[0] != "--bind" or len(rest) != 2 or not rest[1].rpartition(":")[2].isdigit())
    ):
        print("refused: serve takes --bind HOST:PORT only (default 127.0.0.1:8100)", file=sys.stderr)
        return 2
    try:
        if command == "serve":
            from core import rollout
            from receiver import http
            from receiver.dataset.compile import Refused as NotInstalled

            try:
                if http.backend() is http.system:
                    rollout.require_known_schema(using="target")
                else:
                    http.backend().check_installed()
            except (rollout.NewerSchema, NotInstalled) as refused:
                print(refused, file=sys.stderr)
                return 3
            bind = rest[1] if rest else "127.0.0.1:8100"
            try:
                serve(bind)
            except OSError as exc:
                print(f"refused: cannot listen on {bind} ({exc.strerror or exc})", file=sys.stderr)
                return 1
        elif command == "migrate":
            call_command("migrate", database="target", interactive=False, verbosity=0)
            print("receiver database up to date")
        elif command in ("check", "install"):
            from receiver.dataset import install

            print(install.run(rest[0], write=command == "install", rehearse=rehearse))
        elif command == "key":
            from receiver import signing

            print(f"{signing.key_id()}={signing.public_key()}")
        elif command == "demo":
            call_command("demo_target", *rest)
        else:
            print(f"unknown command {command!r}\n{__doc__}", file=sys.stderr)
            return 2
    except (CommandError, DatasetRefused) as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
