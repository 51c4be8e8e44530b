"""The receiver's edges, against the receiver running as its own process: a signature that does not
cover the body, malformed requests (sent as raw bytes where an HTTP client would not send them), a
call refused before anything is written, and the refusals of `python -m receiver` and
`register_target`: each one JSON line or one line on stderr, never a 500, an HTML page, a traceback,
a false success or an echoed secret."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from datetime import timedelta
from typing import Any
from uuid import uuid4

import http_message_signatures as hms
import httpx
import pytest
from django.db import connections

from core import clock, grants
from core.store import connection_url
from deletions import targets
from deletions.models import TargetSystem
from tests import target as demo
from tests.conftest import ROOT, run_command
from tests.receiver.conftest import Receiver, free_port

pytestmark = [pytest.mark.django_db(transaction=True)]


def rows_everywhere() -> dict[str, int]:
    """Every table of the receiver's database (the application's and the receiver's own) and its row count."""
    conn = connections["target"]
    with conn.cursor() as cur:
        cur.execute(
            "SELECT schemaname || '.' || tablename FROM pg_tables WHERE schemaname IN ('public', 'receiver') ORDER BY 1"
        )
        tables = [t for (t,) in cur.fetchall()]
        quoted = [".".join(conn.ops.quote_name(part) for part in t.split(".")) for t in tables]
        cur.execute(" UNION ALL ".join(f"SELECT %s, count(*) FROM {q}" for q in quoted), tables)
        return {t: int(n) for t, n in cur.fetchall()}


def exchange(
    port: int, data: bytes, *, half_close: bool = False, see_close: bool = False
) -> tuple[int, dict[str, str], bytes, bool]:
    """Send raw bytes (then close our side, if `half_close`: all a client sends); the answer's status,
    headers (lower-case), body, and (`see_close`) whether the receiver then closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = s.recv(65536)
            assert chunk, f"the receiver closed without an answer (after {got!r})"
            got += chunk
        head, _, body = got.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
        while len(body) < int(headers["content-length"]):
            chunk = s.recv(65536)
            assert chunk, "the answer ended before its Content-Length"
            body += chunk
        closed = False
        if see_close:
            s.settimeout(5)  # (a kept connection: nothing comes, and the wait ends)
            with contextlib.suppress(TimeoutError):
                closed = s.recv(1) == b""
    return int(status_line.split()[1]), headers, body, closed


def one_json_line(headers: dict[str, str], body: bytes) -> str:
    assert headers["content-type"] == "application/json", headers
    assert b"\n" not in body and body.isascii(), body
    said = json.loads(body)
    # (a 401 also says its kind: "signature", or "replayed" when a copy of the call came first)
    assert set(said) in ({"error"}, {"error", "kind"}) and isinstance(said["error"], str), said
    assert said.get("kind", "signature") in ("signature", "replayed"), said
    return str(said["error"])


def post(path: str, *headers: str, body: bytes = b"") -> bytes:
    head = [f"POST /receiver/v1/{path} HTTP/1.1", "Host: 127.0.0.1", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class _Signer(hms.HTTPSignatureKeyResolver):
    def resolve_public_key(self, key_id: str) -> Any:
        raise KeyError(key_id)

    def resolve_private_key(self, key_id: str) -> Any:
        return grants.private_key()


def signed_over(receiver: Receiver, name: str, body: dict[str, Any], components: tuple[str, ...]) -> httpx.Request:
    """A call signed with the back-office's own key, its signature covering only `components`."""
    content = json.dumps(body).encode()
    request = httpx.Request("POST", receiver.url + name, content=content, headers={"Content-Type": "application/json"})
    now = clock.now()
    hms.HTTPMessageSigner(signature_algorithm=hms.algorithms.ED25519, key_resolver=_Signer()).sign(
        request,
        key_id="backoffice",
        created=now,
        expires=now + timedelta(minutes=1),
        nonce=uuid4().hex,
        covered_component_ids=components,
        body=content if "content-digest" in components else None,
    )
    return request


def test_a_signature_that_does_not_cover_the_body_is_refused_in_one_json_line_and_writes_nothing(
    receiver: Receiver,
) -> None:
    body = {"request_id": str(uuid4())}
    before = rows_everywhere()
    with httpx.Client() as client:
        for request in (
            signed_over(receiver, "fence", body, ("@method", "@target-uri")),
            signed_over(receiver, "fence", {}, ("@method", "@target-uri")),  # (an empty object: a body still)
            signed_over(receiver, "fence", body, ("@method", "content-digest")),
        ):
            refused = client.send(request)
            assert refused.status_code == 401, refused.text
            error = one_json_line(dict(refused.headers), refused.content)
            assert error.startswith("call refused: its signature does not verify"), error
            assert "was not covered by the signature" in error, error
        assert rows_everywhere() == before  # not even the nonce was taken
        covered = client.send(signed_over(receiver, "fence", body, ("@method", "@target-uri", "content-digest")))
    assert covered.status_code == 200 and covered.json() == {"generation": 0}  # the same call, the body covered
    assert rows_everywhere()["receiver.receiver_call_nonces"] == before["receiver.receiver_call_nonces"] + 1


SIGNED_LENGTH = "Content-Type: application/json"
# The server's own refusals (receiver/serve.py), before the application sees the request.
FRAMING = "a call gives one Content-Length, a number of bytes, and no Transfer-Encoding"
HEADERS = "the request's headers are over 16384 bytes or 100 fields"
NOT_A_REQUEST = "this receiver speaks HTTP/1.x: the request line is not one"
MALFORMED: list[tuple[str, bytes, int, str]] = [
    ("negative length", post("fence", SIGNED_LENGTH, "Content-Length: -5"), 400, FRAMING),
    ("signed length", post("fence", SIGNED_LENGTH, "Content-Length: +5", body=b"{}{}{"), 400, FRAMING),
    ("length with _", post("fence", SIGNED_LENGTH, "Content-Length: 1_0", body=b"{}" * 5), 400, FRAMING),
    ("words for length", post("fence", SIGNED_LENGTH, "Content-Length: ten"), 400, FRAMING),
    ("two lengths", post("fence", SIGNED_LENGTH, "Content-Length: 2", "Content-Length: 2", body=b"{}"), 400, FRAMING),
    ("no length", post("fence", SIGNED_LENGTH), 400, "a call gives its body's length"),
    ("absurd length", post("fence", SIGNED_LENGTH, "Content-Length: " + "9" * 5000), 400, FRAMING),
    ("length over the limit", post("fence", SIGNED_LENGTH, "Content-Length: 65537"), 413, "at most 65536 bytes"),
    ("chunked", post("fence", SIGNED_LENGTH, "Transfer-Encoding: chunked", body=b"2\r\n{}\r\n0\r\n\r\n"), 400, FRAMING),
    (
        "chunked and a length",
        post("fence", SIGNED_LENGTH, "Content-Length: 2", "Transfer-Encoding: chunked"),
        400,
        FRAMING,
    ),
    ("text body", post("fence", "Content-Type: text/plain", "Content-Length: 2", body=b"{}"), 415, "'text/plain'"),
    ("untyped body", post("fence", "Content-Length: 2", body=b"{}"), 415, "body is application/json, not"),
    ("unknown call", post("delete-everything", SIGNED_LENGTH, "Content-Length: 2", body=b"{}"), 404, "no call"),
    ("outside the prefix", b"GET /admin/ HTTP/1.1\r\nHost: x\r\n\r\n", 404, "this receiver speaks /receiver/v1/"),
    ("GET of a call", b"GET /receiver/v1/apply HTTP/1.1\r\nHost: x\r\n\r\n", 405, "takes POST only"),
    ("POST to discovery", post("", SIGNED_LENGTH, "Content-Length: 2", body=b"{}"), 405, "takes GET only"),
    ("unknown method", b"BREW /receiver/v1/fence HTTP/1.1\r\nHost: x\r\n\r\n", 405, "takes POST only"),
    ("request line over 8 kB", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n", 414, "over 8192 bytes"),
    ("a header line over 64 kB", b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 65560 + b"\r\n\r\n", 431, HEADERS),
    ("headers over 16 kB", b"GET / HTTP/1.1\r\n" + b"X-A: " + b"a" * 17000 + b"\r\n\r\n", 431, HEADERS),
    (
        "headers over 16 kB together",
        b"GET / HTTP/1.1\r\n" + b"X-A: " + b"a" * 9000 + b"\r\n" + b"X-B: " + b"b" * 9000 + b"\r\n\r\n",
        431,
        HEADERS,
    ),
    ("too many headers", b"GET / HTTP/1.1\r\n" + b"X-A: a\r\n" * 150 + b"\r\n", 431, HEADERS),
    ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400, NOT_A_REQUEST),
    ("HTTP/0.9", b"GET /receiver/v1/\r\n\r\n", 400, NOT_A_REQUEST),
]
NOT_HTTP: list[tuple[str, bytes, int, str]] = [
    ("a TLS hello", bytes.fromhex("16030100f4010000f00303") + bytes(range(32)), 400, NOT_A_REQUEST),
    ("words", b"hello receiver\r\n", 400, NOT_A_REQUEST),
    ("SSH", b"SSH-2.0-OpenSSH_9.6\r\n", 400, NOT_A_REQUEST),
    ("a cut body", post("fence", SIGNED_LENGTH, "Content-Length: 100", body=b'{"request_id":'), 400, "ended after 14"),
]


def test_every_malformed_request_is_one_json_line_with_its_status_never_a_500_or_a_page(receiver: Receiver) -> None:
    before = rows_everywhere()
    for what, sent, status, says in MALFORMED + NOT_HTTP:
        got, headers, body, _ = exchange(receiver.port, sent, half_close=(what, sent, status, says) in NOT_HTTP)
        error = one_json_line(headers, body)
        assert got == status and says in error, (what, got, error)
        if status == 405:
            assert headers["allow"] in ("GET", "POST"), what
    # One empty line before a request is allowed (RFC 9112 section 2.2): then nothing came, nothing is answered.
    with socket.create_connection(("127.0.0.1", receiver.port), timeout=20) as s:
        s.sendall(b"\r\n")
        s.shutdown(socket.SHUT_WR)
        assert s.recv(1) == b""
    assert rows_everywhere() == before
    assert httpx.get(receiver.url).status_code == 200  # still serving
    assert "Traceback" not in receiver.logged() and "Error" not in receiver.logged(), receiver.logged()


def test_a_body_refused_unread_closes_the_connection_so_it_is_never_read_as_the_next_request(
    receiver: Receiver,
) -> None:
    """Its bytes would otherwise be parsed as a request of their own (a call smuggled inside a body)."""
    inner = b"GET /receiver/v1/ HTTP/1.1\r\nHost: x\r\n\r\n"
    got, _, _, closed = exchange(
        receiver.port,
        post("fence", "Content-Type: text/plain", f"Content-Length: {len(inner)}", body=inner),
        see_close=True,
    )
    assert (got, closed) == (415, True)
    # A call answered in full keeps its connection (the back-office's calls share one).
    got, _, _, closed = exchange(receiver.port, b"GET /receiver/v1/ HTTP/1.1\r\nHost: x\r\n\r\n", see_close=True)
    assert (got, closed) == (200, False)


BAD_INPUT: list[tuple[str, dict[str, Any], str]] = [
    ("preview", {"target": "demo:fresh", "community_ids": ["not-a-uuid"]}, "'community_ids' must be a list"),
    ("preview", {"target": "demo:fresh", "community_ids": [str(uuid4()), 7]}, "'community_ids' must be a list"),
    ("preview", {"target": "demo:" + "x" * 300, "community_ids": []}, "'target' must be 1 to 240"),
    ("preview", {"target": "demo:fresh\n", "community_ids": []}, "printable characters"),
    ("preview", {"target": "demo:fresh", "community_ids": [], "also": 1}, "'also' is not a field of this call"),
    ("inventory", {"target": "demo:fresh", "communities": 0}, "'communities' must be 1 to 10000"),
    ("inventory", {"target": "", "communities": 2}, "'target' must be 1 to 240"),
    ("fence", {"request_id": "7"}, "'request_id' must be a UUID"),
]


def test_a_signed_call_with_malformed_input_is_refused_before_anything_is_written(receiver: Receiver) -> None:
    """The preview used to enroll (and commit) the person before it read the community ids; no call
    writes, not even its nonce, before its whole input is checked."""
    demo.enroll("demo:fresh")  # in the demo application (a receiver in its own process enrolls no one)
    adapter = targets.for_target("demo:fresh")
    before = rows_everywhere()
    with httpx.Client() as client:
        for name, body, says in BAD_INPUT:
            refused = client.send(adapter.signed(name, body))  # type: ignore[attr-defined]
            assert refused.status_code == 400, (name, body, refused.text)
            assert says in one_json_line(dict(refused.headers), refused.content), refused.text
            assert rows_everywhere() == before, (name, body)
        # The same call with good ids writes (the counting above can see a write).
        ok = client.send(adapter.signed("preview", {"target": "demo:fresh", "community_ids": []}))  # type: ignore[attr-defined]
    assert ok.status_code == 200, ok.text
    after = rows_everywhere()
    assert after["receiver.receiver_people"] == before["receiver.receiver_people"] + 1, after
    assert "Traceback" not in receiver.logged(), receiver.logged()


def receiver_command(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("EMBEDDED_PG", "DJANGO_SETTINGS", "RECEIVER"))}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "receiver", *argv], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60
    )


NOWHERE = "postgresql://nobody@127.0.0.1:{port}/nothing"
DEMO = "samples/demo/dataset.yaml"
PRODUCTION = {
    "DEPLOYMENT_ENV": "production",
    "RECEIVER_SIGNING_KEY": "k",
    "RECEIVER_BACKOFFICE_KEY": "k",
    "RECEIVER_PUBLIC_URL": "https://receiver.example.org/receiver/v1/",
}


@pytest.mark.parametrize(
    ("argv", "env", "code", "said"),
    [
        (["serve", "--bind", ":99999"], {}, 2, "refused: serve takes --bind HOST:PORT only, a port 0-65535"),
        (["serve", "--bind", "127.0.0.1:123456"], {}, 2, "refused: serve takes --bind HOST:PORT only"),
        (["serve", "--bind"], {}, 2, "refused: serve takes --bind HOST:PORT only"),
        (["check", DEMO], {"RECEIVER_DATABASE_URL": NOWHERE}, 1, "refused: the receiver's database cannot be used ("),
        (["serve"], {"RECEIVER_DATASET": DEMO}, 1, "refused: the receiver's database cannot be used ("),
        (["serve"], {}, 3, "RECEIVER_DATASET names no dataset file: the receiver serves the one installed"),
        (["install", DEMO], {"RECEIVER_DATABASE_URL": NOWHERE}, 1, "refused: the receiver's database"),
        (["key"], {"RECEIVER_SIGNING_KEY": "not-a-key"}, 1, "refused: RECEIVER_SIGNING_KEY is not an Ed25519"),
        (["serve"], {"RECEIVER_SIGNING_KEY": "A" * 42}, 1, "refused: RECEIVER_SIGNING_KEY is not an Ed25519"),
        (["serve"], {"RECEIVER_BACKOFFICE_KEY": "short"}, 1, "refused: RECEIVER_BACKOFFICE_KEY is not an Ed25519"),
        (["key"], {"RECEIVER_MAX_ROWS": "lots"}, 1, "refused: RECEIVER_MAX_ROWS must be a whole number, not 'lots'"),
        (["key"], {"RECEIVER_DATABASE_URL": "pg://me:hunter2@db/x"}, 1, "refused: RECEIVER_DATABASE_URL is not a"),
        (
            ["key"],
            {"DEPLOYMENT_ENV": "production"},
            1,
            "refused: RECEIVER_SIGNING_KEY, RECEIVER_BACKOFFICE_KEY, RECEIVER_PUBLIC_URL must",
        ),
        (["key"], {"RECEIVER_PUBLIC_URL": "receiver.example.org"}, 1, "refused: RECEIVER_PUBLIC_URL 'receiver.exa"),
        (
            ["serve"],
            {"RECEIVER_PUBLIC_URL": "https://receiver.example.org/v1/"},
            1,
            "refused: RECEIVER_PUBLIC_URL 'https://receiver.example.org/v1/' must end with /receiver/v1/",
        ),
        (["key"], {**PRODUCTION, "RECEIVER_TEST_LOOKUP_LAG_SECONDS": "5"}, 1, "refused: RECEIVER_TEST_LOOKUP_LAG"),
        (["key"], {**PRODUCTION, "RECEIVER_TEST_UNREADABLE_UNTIL": "2099-01-01"}, 1, "refused: RECEIVER_TEST_UNREAD"),
        (["nonsense"], {}, 2, "refused: unknown command 'nonsense'"),
        (["key"], {"RECEIVER_THREADS": "0"}, 1, "refused: RECEIVER_THREADS must be 1 to 100000, not 0"),
        (["key"], {"RECEIVER_KEEPALIVE_SECONDS": "1s"}, 1, "refused: RECEIVER_KEEPALIVE_SECONDS must be a whole"),
        (["key"], {"RECEIVER_THREADS": "9", "RECEIVER_CONNECTIONS": "9"}, 1, "refused: RECEIVER_CONNECTIONS (9) must"),
        (["key"], {"RECEIVER_SIGNING_KEY_FILE": "/nowhere/key"}, 1, "refused: RECEIVER_SIGNING_KEY_FILE names no"),
        (["key"], {"RECEIVER_SIGNING_KEY_FILE": str(ROOT / "README.md")}, 1, "refused: RECEIVER_SIGNING_KEY_FILE is "),
        (["serve"], {"RECEIVER_TLS_CERT": str(ROOT / "README.md")}, 1, "refused: RECEIVER_TLS_CERT and RECEIVER_TLS"),
    ],
)
def test_every_refusal_of_the_receiver_command_is_one_line_and_a_non_zero_exit(
    argv: list[str], env: dict[str, str], code: int, said: str
) -> None:
    env = {"RECEIVER_DATABASE_URL": NOWHERE, **env}
    env["RECEIVER_DATABASE_URL"] = env["RECEIVER_DATABASE_URL"].format(port=free_port())
    ran = receiver_command(*argv, **env)
    assert ran.returncode == code and ran.stderr.startswith(said), ran.stderr
    assert ran.stderr.count("\n") == 1 and not ran.stdout, ran.stderr
    assert "hunter2" not in ran.stderr


def test_a_receiver_told_to_listen_where_one_already_does_refuses_in_one_line(receiver: Receiver) -> None:
    ran = receiver_command(
        "serve",
        "--bind",
        f"127.0.0.1:{receiver.port}",
        RECEIVER_DATABASE_URL=connection_url("target"),
        RECEIVER_DATASET=DEMO,
    )
    assert ran.returncode == 1 and ran.stderr.startswith(f"refused: cannot listen on 127.0.0.1:{receiver.port} ")
    assert ran.stderr.count("\n") == 1, ran.stderr


def test_register_target_refuses_the_manual_prefix_and_a_url_with_a_password_without_echoing_it(
    receiver: Receiver,
) -> None:
    key = f"{receiver.key_id}={receiver.public()}"
    manual = run_command(
        "register_target", "--name", "by hand", "--prefix", "manual:", "--url", receiver.url, "--key", key, token=False
    )
    assert manual.code == 2 and manual.err.startswith("refused: manual: is the back-office's own"), manual.err
    assert "\n" not in manual.err.strip() and not manual.out
    with_password = receiver.url.replace("http://", "http://user:s3cret-word@")
    assert httpx.get(with_password).status_code == 200  # it answers there: only the URL is refused
    secret = run_command(
        "register_target", "--name", "pw", "--prefix", "pw:", "--url", with_password, "--key", key, token=False
    )
    assert secret.code == 2 and "the URL carries a user name or password: give it without" in secret.err
    assert "s3cret" not in secret.err + secret.out and "\n" not in secret.err.strip()
    assert not TargetSystem.objects.filter(prefix__in=["manual:", "pw:"]).exists()
    assert not TargetSystem.objects.filter(name__in=["by hand", "pw"]).exists()
