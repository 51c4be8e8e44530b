"""`python -m receiver serve`: the receiver's WSGI application (`http.served`) under gunicorn.

One worker process (the receiver's state per process, its metrics among it, stays one; Django's
database connections are per thread) with gunicorn's threaded worker: `RECEIVER_THREADS` threads run
calls, each with its own database connection. A connection holds a thread only while a request of it
is being read or answered: a new connection, like a kept-alive one, waits in the worker's poller until
its first bytes arrive (gunicorn would give it a thread for up to 5 s first, so a few hundred idle
connections would queue every real call behind them), and is closed after `RECEIVER_KEEPALIVE_SECONDS`
idle. A client has `RECEIVER_READ_TIMEOUT_SECONDS` from a request's first byte (or its TLS
handshake's) to send all of it, then is dropped, so one trickling bytes holds a thread that long at
most. At most `RECEIVER_CONNECTIONS` are open; past it new ones wait in the listen queue. The worker
is restarted only when its main loop stops for longer than the statement timeout and a margin, so a
slow effect is never cut by the server.

What never reaches the application is refused here in the protocol's JSON (`Worker.handle_error`):
bytes that are not an HTTP/1.x request (400; 505 for another version), a request line over
`MAX_REQUEST_LINE` (414), headers over `MAX_HEADER_BYTES` or too many (431), a body framed other than
by one Content-Length (400), plain HTTP sent to it while it serves TLS (400). TLS is gunicorn's when
`RECEIVER_TLS_CERT` and `RECEIVER_TLS_KEY` are set.
"""

from __future__ import annotations

import ctypes
import json
import os
import selectors
import signal
import socket
import ssl
import sys
import threading
import time
from functools import partial
from typing import Any

from gunicorn import http as ghttp
from gunicorn import sock as gsock
from gunicorn.app.base import BaseApplication
from gunicorn.http import errors
from gunicorn.workers.gthread import TConn, ThreadWorker

from receiver import protocol
from receiver import settings as conf  # (the module Django reads: this process runs on it alone)

PR_SET_PDEATHSIG = 1  # prctl(2)
TLS_HANDSHAKE = b"\x16"  # the first byte of every TLS connection (a handshake record)
MAX_HEADER_FIELDS = 100  # a signed call sends about 8
NOT_HTTP = "this receiver speaks HTTP/1.x: the request line is not one"
FRAMING = "a call gives one Content-Length, a number of bytes, and no Transfer-Encoding"
REQUEST_LINE = f"the request line is over {protocol.MAX_REQUEST_LINE} bytes"
HEADERS = f"the request's headers are over {protocol.MAX_HEADER_BYTES} bytes or {MAX_HEADER_FIELDS} fields"
REASONS = {400: "Bad Request", 414: "URI Too Long", 431: "Request Header Fields Too Large"}
REASONS |= {500: "Internal Server Error", 501: "Not Implemented", 505: "HTTP Version Not Supported"}


class NotTLS(Exception):
    """Bytes that do not begin a TLS handshake, sent to a receiver that serves TLS (plain HTTP, most often)."""


def refusal(exc: BaseException) -> tuple[int, str]:
    """The status and the protocol's words for a request gunicorn could not read."""
    if isinstance(exc, errors.LimitRequestLine):
        return 414, REQUEST_LINE
    if isinstance(exc, errors.LimitRequestHeaders):
        return 431, HEADERS
    if isinstance(exc, errors.InvalidHTTPVersion):
        return 505, NOT_HTTP
    if isinstance(exc, (errors.InvalidRequestLine, errors.InvalidRequestMethod, errors.InvalidH2CPreface)):
        return 400, NOT_HTTP
    if isinstance(exc, errors.InvalidHeader) and getattr(exc, "hdr", "") in ("CONTENT-LENGTH", "TRANSFER-ENCODING"):
        return 400, FRAMING
    if isinstance(exc, (errors.UnsupportedTransferCoding, errors.InvalidChunkSize, errors.ChunkMissingTerminator)):
        return 400, FRAMING
    if isinstance(exc, (errors.InvalidHeader, errors.InvalidHeaderName, errors.ObsoleteFolding)):
        return 400, "a header field is malformed (RFC 9110 field syntax)"
    if isinstance(exc, NotTLS):
        return 400, "this receiver speaks HTTPS: the request was not sent over TLS"
    if isinstance(exc, ssl.SSLError):  # (the client broke the handshake off: nothing reaches it)
        return 400, "the TLS handshake failed"
    if isinstance(exc, errors.ParseException):
        return 400, f"the request does not read as HTTP/1.x ({type(exc).__name__})"
    return 500, f"the receiver failed on this request ({type(exc).__name__}); see its log"


class _Patient:
    """A connection's socket as the request parser reads it: a request (its head and its body) is read
    within `seconds` of its first read; past that, the next read reads as the end of the connection (the
    client is gone as far as this request goes), so a client trickling bytes holds a thread that long."""

    def __init__(self, sock: socket.socket, seconds: float) -> None:
        self.sock, self.seconds = sock, seconds
        self.deadline: float | None = None

    def next_request(self) -> None:
        self.deadline = None

    def recv(self, size: int) -> bytes:
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + self.seconds
        if now >= self.deadline:
            return b""
        self.sock.settimeout(self.deadline - now)  # (the worker makes it blocking again before each request)
        try:
            return self.sock.recv(size)
        except TimeoutError:
            return b""


class Connection(TConn):  # type: ignore[misc]
    """A connection whose TLS handshake and request reads are bounded (`_Patient`); HTTP/1.x only."""

    initialized: bool
    sock: Any

    def init(self) -> None:
        if self.initialized:
            return
        self.initialized = True
        seconds = conf.RECEIVER_READ_TIMEOUT_SECONDS
        self.sock.settimeout(seconds)
        if self.cfg.is_ssl:
            try:
                first = self.sock.recv(1, socket.MSG_PEEK)
            except TimeoutError:
                raise StopIteration from None
            if first and first != TLS_HANDSHAKE:  # (answered in plain words, on the plain connection)
                raise NotTLS(first)
            try:
                self.sock = gsock.ssl_wrap_socket(self.sock, self.cfg)  # (the handshake, within `seconds`)
            except TimeoutError:
                raise StopIteration from None  # (gunicorn closes the connection quietly)
        self.patient = _Patient(self.sock, seconds)
        self.parser = ghttp.get_parser(self.cfg, self.patient, self.client)


class Worker(ThreadWorker):  # type: ignore[misc]
    """gunicorn's threaded worker, with connections that hold no thread until they send something and
    refusals in the protocol's JSON."""

    wsgi: Any
    serving = threading.local()  # the request each thread answers (`_closing_unread` may close it)

    def accept(self, listener: socket.socket) -> None:
        """A new connection waits in the poller, like a kept-alive one, until its first bytes arrive
        (closed by `murder_pending` after the keep-alive time if none do)."""
        try:
            client, address = listener.accept()
        except (BlockingIOError, ConnectionAbortedError):
            return
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # (no Nagle delay behind a delayed ACK)
        self.nr_conns += 1
        conn = Connection(self.cfg, client, address, listener.getsockname())
        conn.timeout = time.monotonic() + self.cfg.keepalive
        self.pending_conns.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_pending_socket_readable, conn))

    def handle(self, conn: Any) -> Any:
        """One request of this connection, read within the read timeout from its first byte."""
        if conn.initialized and not conn.is_http2:
            conn.patient.next_request()
        return super().handle(conn)

    def load_wsgi(self) -> None:
        super().load_wsgi()
        self.wsgi = partial(self._closing_unread, self.wsgi)

    def _closing_unread(self, app: Any, environ: dict[str, Any], start_response: Any) -> Any:
        """The application's answer; a connection whose request body it did not read whole (refused before
        it was read) closes after the answer, so no byte of that body is ever waited on or read as a request."""
        answer = app(environ, start_response)
        reader = getattr(environ["wsgi.input"], "reader", None)
        if getattr(reader, "length", 0):
            self.serving.request.force_close()
        return answer

    def handle_request(self, req: Any, conn: Any) -> bool:
        """Refuse what gunicorn would take but the protocol does not: a body framed by Transfer-Encoding,
        headers over `MAX_HEADER_BYTES` all together (gunicorn bounds each field and their number)."""
        if any(name == "TRANSFER-ENCODING" for name, _ in req.headers):
            raise errors.InvalidHeader("TRANSFER-ENCODING")
        if sum(len(name) + len(value) + 4 for name, value in req.headers) > protocol.MAX_HEADER_BYTES:
            raise errors.LimitRequestHeaders("all header fields together")
        self.serving.request = req
        return bool(super().handle_request(req, conn))

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        """Every refusal made here is the protocol's: one JSON line `{"error": ...}`, then the connection closes."""
        status, message = refusal(exc)
        if status >= 500:
            self.log.exception("request failed before the application: %s", exc)
        else:
            self.log.debug("request refused (%s): %s", status, exc)
        data = json.dumps({"error": message}, separators=(",", ":")).encode()
        head = (
            f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: {protocol.CONTENT_TYPE}\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
        )
        try:
            client.sendall(head.encode("latin-1") + data)
        except OSError:
            self.log.debug("the refusal could not be sent: the client is gone")


def listening(sock: socket.socket) -> str:
    """The URL a socket serves the protocol at."""
    host, port = sock.getsockname()[:2]
    scheme = "https" if conf.RECEIVER_TLS_CERT else "http"
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}{protocol.PREFIX}"


def when_ready(server: Any) -> None:
    """The line tests and `bin/run-dev` read: the receiver's URL, once it listens (and its public URL
    when that differs: a proxy's)."""
    at, public = listening(server.LISTENERS[0].sock), conf.RECEIVER_PUBLIC_URL
    print(f"Receiver: {at}" + (f" (public URL {public})" if public != at else ""), flush=True)


def post_fork(server: Any, worker: Any) -> None:
    """The worker dies with the process that started it: a receiver killed (SIGKILL, as a crash or a
    test kills it) leaves no worker behind still serving, holding its port and its database connections."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server.pid:  # (it died before the line above)
        os._exit(1)


def post_worker_init(worker: Any) -> None:
    """What a serving process starts beside its threads (`receiver.http.worker_started`)."""
    from receiver import http

    http.worker_started()


class Server(BaseApplication):  # type: ignore[misc]
    """gunicorn configured from the receiver's settings, serving on a socket bound already."""

    def __init__(self, listener: socket.socket) -> None:
        self.listener = listener
        super().__init__()

    def load_config(self) -> None:
        worker_seconds = conf.RECEIVER_STATEMENT_TIMEOUT_MS // 1000 + 30  # (past any effect's own bound)
        options: dict[str, Any] = {
            "bind": [f"fd://{self.listener.fileno()}"],
            "workers": 1,
            "worker_class": "receiver.serve.Worker",
            "threads": conf.RECEIVER_THREADS,
            "worker_connections": conf.RECEIVER_CONNECTIONS,
            "keepalive": conf.RECEIVER_KEEPALIVE_SECONDS,
            "timeout": worker_seconds,
            "graceful_timeout": worker_seconds,  # a stop lets running calls finish
            # gunicorn counts the request line without its CRLF, the protocol with it.
            "limit_request_line": protocol.MAX_REQUEST_LINE - 2,
            "limit_request_fields": MAX_HEADER_FIELDS,
            "limit_request_field_size": protocol.MAX_HEADER_BYTES,
            # X-Forwarded-Proto believed from a proxy on this host only (deploy/receiver-nginx.conf), whatever
            # FORWARDED_ALLOW_IPS the environment holds: the scheme is part of the URL a call is signed for.
            "forwarded_allow_ips": "127.0.0.1,::1",
            "preload_app": True,
            "accesslog": None,
            "loglevel": "warning",
            "when_ready": when_ready,
            "post_fork": post_fork,
            "post_worker_init": post_worker_init,
            "proc_name": "receiver",
            "control_socket_disable": True,
        }
        if conf.RECEIVER_TLS_CERT:
            options |= {"certfile": conf.RECEIVER_TLS_CERT, "keyfile": conf.RECEIVER_TLS_KEY}
        for name, value in options.items():
            self.cfg.set(name, value)

    def load(self) -> Any:
        from receiver.http import served

        return served


def tls_refused() -> str:
    """Why TLS as configured cannot be served ("" when it can: both files load as a certificate chain and
    its key, or neither is set)."""
    cert, key = conf.RECEIVER_TLS_CERT, conf.RECEIVER_TLS_KEY
    if bool(cert) != bool(key):
        return "RECEIVER_TLS_CERT and RECEIVER_TLS_KEY are set together (TLS) or not at all"
    if not cert:
        return ""
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"RECEIVER_TLS_CERT and RECEIVER_TLS_KEY do not load as a certificate and its key ({said})"
    return ""


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on this address (OSError when it cannot be had: the caller refuses in one line)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
        listener.listen(2048)
    except BaseException:
        listener.close()
        raise
    return listener


def serve(host: str, port: int) -> None:
    """Listen on HOST:PORT and serve until stopped (SIGTERM or Ctrl-C: running calls finish first). Calls
    are checked as signed for `RECEIVER_PUBLIC_URL`; unset (development only: production requires it),
    it is the address listened on."""
    from django.conf import settings

    listener = listen(host, port)
    settings.RECEIVER_PUBLIC_URL = conf.RECEIVER_PUBLIC_URL = conf.RECEIVER_PUBLIC_URL or listening(listener)
    Server(listener).run()
