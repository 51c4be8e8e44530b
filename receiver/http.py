"""The receiver's HTTP face: a WSGI application for `/receiver/v1/` (`protocol.py`).

Each call is checked whole before anything is written (`_handle`): its path and method, its body's
length and type, its signature (`signing.check_call`), its JSON body and every field; only then does
the call run, in one transaction of the receiver's database: its nonce taken (`signing.take_nonce`) and
the dataset's backend (`receiver.dataset.backend`) called once. An apply's nonce is written in the
effect's own transaction, so a call refused or rolled back takes its nonce back with it (`_handle`).
Every refusal is one JSON line. The evidence of `apply` and `lookup` is signed by this receiver
(`signing.evidence`). Every check on the effect itself runs in that transaction.

What never reaches this application (bytes that are not HTTP, a request line or headers over the
protocol's limits, a body not framed by one Content-Length) is refused, in the same JSON, by the server
that runs it (`serve.Worker`).

A call is checked as signed for this receiver's public URL (`RECEIVER_PUBLIC_URL`), never for its
`Host`. Every answer is counted (`metrics.py`, served at `/receiver/v1/metrics`); expired nonces are
swept by a thread the serving process starts beside its own (`worker_started`), never on a call's path.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from uuid import UUID

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, close_old_connections, connections, transaction
from django.db import Error as DatabaseFault
from django.utils import timezone

from receiver import ALIAS, effects, metrics, protocol, signing
from receiver.dataset import backend
from wire.crashpoints import crash_point

logger = logging.getLogger("receiver")

CAPABILITIES = {
    "fences_stale_owners": True,
    "checks_expected_version": True,
    "idempotent_per_operation": True,
    "lookups_can_lag": True,
}

StartResponse = Callable[..., Any]


class BadBody(Exception):
    pass


Answer = tuple[int, dict[str, Any]]
Run = Callable[[], Answer]  # what a call does, once its input is validated


def _field(body: dict[str, Any], name: str, kind: type) -> Any:
    value = body.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise BadBody(f"{name!r} must be a {kind.__name__}")
    return value


def _uuid(body: dict[str, Any], name: str) -> UUID:
    try:
        return UUID(_field(body, name, str))
    except ValueError:
        raise BadBody(f"{name!r} must be a UUID") from None


def _target(body: dict[str, Any]) -> str:
    target = _field(body, "target", str)
    if not 1 <= len(target) <= protocol.MAX_TARGET_CHARS or not target.isprintable():
        raise BadBody(f"'target' must be 1 to {protocol.MAX_TARGET_CHARS} printable characters")
    return target


def _community_ids(body: dict[str, Any]) -> list[str]:
    ids = _field(body, "community_ids", list)
    try:
        return [str(UUID(i)) for i in ids]
    except (TypeError, ValueError, AttributeError):
        raise BadBody("'community_ids' must be a list of UUIDs") from None


def inventory(body: dict[str, Any]) -> Run:
    target, communities = _target(body), _field(body, "communities", int)
    if not 1 <= communities <= protocol.MAX_COMMUNITIES:
        raise BadBody(f"'communities' must be 1 to {protocol.MAX_COMMUNITIES}")
    return lambda: (200, {"communities": backend.memberships(target, communities)})


def preview(body: dict[str, Any]) -> Run:
    target, ids = _target(body), _community_ids(body)
    return lambda: (200, {"communities": backend.preview(target, ids)})


def fence(body: dict[str, Any]) -> Run:
    request_id = _uuid(body, "request_id")
    return lambda: (200, {"generation": backend.fence(request_id)})


def apply(body: dict[str, Any]) -> Run:
    grant = _field(body, "grant", str)

    def run() -> Answer:
        began = timezone.now()
        evidence = backend.apply(grant)  # (effects.Busy: rolled back whole, with the nonce; answered 409)
        transaction.on_commit(lambda: _applied(evidence, began), using=ALIAS)
        return 200, {"evidence": signing.evidence(evidence)}

    return run


def _applied(evidence: dict[str, Any], began: Any) -> None:
    """Once the call's transaction committed (the nonce and the effect): counted, not answered yet."""
    metrics.applied(evidence, began)
    crash_point("receiver-after-commit", production=settings.PRODUCTION)


def lookup(body: dict[str, Any]) -> Run:
    operation_id = _uuid(body, "operation_id")

    def run() -> Answer:
        try:
            answer = backend.lookup(operation_id)
        except effects.Unreadable as exc:
            return 200, {"unreadable": str(exc)}
        if isinstance(answer, effects.Found):
            return 200, {"found": signing.evidence(answer.evidence)}
        # Signed too: "not applied as of this watermark" lets the back-office send the operation again; with
        # what this database has applied, so a "not found" after a restore is told from one before the apply.
        said = {
            "operation_id": body["operation_id"],
            "watermark": answer.watermark.isoformat(),
            "receiver_state": backend.state(),
        }
        return 200, {"not_found": signing.evidence(said)}

    return run


def health() -> Answer:
    """`GET /receiver/v1/health`: whether this receiver reaches its database, the installed dataset's
    name, version and digest, its schema version and its state (what it has applied), the state signed
    as its evidence is, so the back-office can believe it. 503 when the database does not answer."""
    try:
        with transaction.atomic(using=ALIAS):  # one transaction: the dataset installed and the state, as one
            said: dict[str, Any] = backend.health()
    except DatabaseError as exc:
        if not connections[ALIAS].in_atomic_block:
            connections[ALIAS].close()
        return 503, {"error": f"the receiver could not reach its database ({type(exc).__name__})"}
    state = said.pop("state", None)
    signed = {"state": signing.evidence({"receiver_state": state})} if state is not None else {}
    return 200, {"database": "reachable", "name": discovery()["name"], **said, **signed}


def withdraw(body: dict[str, Any]) -> Run:
    withdrawal = _field(body, "withdrawal", str)

    def run() -> Answer:
        epoch = backend.withdraw(withdrawal)
        # Signed: an acknowledged withdrawal is no longer pushed, so only the receiver may say it enforces it.
        return 200, {"acknowledged": signing.evidence({"withdrawal": withdrawal, "epoch": epoch})}

    return run


# Each call checks its whole input and returns what it does; that runs in the transaction that takes its nonce.
CALLS: dict[str, Callable[[dict[str, Any]], Run]] = {
    "inventory": inventory,
    "preview": preview,
    "fence": fence,
    "apply": apply,
    "lookup": lookup,
    "withdraw": withdraw,
}
# The fields each call takes, as the protocol's document declares them (no other field is taken).
TAKES = {
    path.removeprefix(protocol.PREFIX): frozenset(body["schema"]["properties"])
    for path, op in protocol.openapi()["paths"].items()
    if (body := op.get("post", {}).get("requestBody", {}).get("content", {}).get(protocol.CONTENT_TYPE))
}
# Path -> the one method it answers.
ROUTES = {protocol.PREFIX: "GET", protocol.PREFIX + "openapi.json": "GET", protocol.METRICS: "GET"}
ROUTES |= {protocol.PREFIX + "health": "GET"}
ROUTES |= {protocol.PREFIX + name: "POST" for name in CALLS}


def discovery() -> dict[str, Any]:
    return {
        "protocol": "deletion-receiver",
        "version": protocol.VERSION,
        "name": backend.name(),
        "capabilities": CAPABILITIES,
        "key_id": signing.key_id(),
        "keys": {signing.key_id(): signing.public_key()},
        "calls": list(protocol.CALLS),
    }


def _url(environ: dict[str, Any]) -> str:
    """The URL a call must be signed for: this receiver's public URL (`RECEIVER_PUBLIC_URL`) plus the
    call's path, never what its `Host` says, so a call signed for another receiver that takes the same
    back-office key is refused here."""
    public = getattr(settings, "RECEIVER_PUBLIC_URL", "")
    if not public:  # (production requires it; `serve` derives it in development; a mount is given it)
        raise ImproperlyConfigured("RECEIVER_PUBLIC_URL is not set: no call can be checked against this receiver's URL")
    query = f"?{environ['QUERY_STRING']}" if environ.get("QUERY_STRING") else ""
    return public + environ.get("PATH_INFO", "").removeprefix(protocol.PREFIX) + query


def _headers(environ: dict[str, Any]) -> dict[str, str]:
    found = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
    if environ.get("CONTENT_TYPE"):
        found["content-type"] = environ["CONTENT_TYPE"]
    return found


REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed"}
REASONS |= {409: "Conflict", 413: "Content Too Large", 415: "Unsupported Media Type", 422: "Unprocessable Content"}
REASONS |= {500: "Internal Server Error", 503: "Service Unavailable"}


def _answer(start_response: StartResponse, status: int, body: dict[str, Any], allow: str = "") -> Iterable[bytes]:
    data = json.dumps(body, separators=(",", ":")).encode()
    headers = [("Content-Type", protocol.CONTENT_TYPE), ("Content-Length", str(len(data)))]
    start_response(f"{status} {REASONS[status]}", headers + ([("Allow", allow)] if status == 405 else []))
    return [data]


def application(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """Answer one call, counted by what it was answered (`metrics.answered`); the metrics themselves are
    Prometheus' text, every other answer one JSON object."""
    started, path = time.perf_counter(), environ.get("PATH_INFO", "")
    if path == protocol.METRICS and environ.get("REQUEST_METHOD") == "GET":
        metrics.answered(path, 200, {}, 0.0)
        data, media = metrics.exposition()
        start_response("200 OK", [("Content-Type", media), ("Content-Length", str(len(data)))])
        return [data]
    try:
        status, body = _handle(environ)
    except Exception as exc:  # a fault of this receiver, not of the call: one JSON line, the traceback logged
        logger.exception("call failed")
        status, body = 500, {"error": f"the receiver failed on this call ({type(exc).__name__}); see its log"}
    metrics.answered(path, status, body, time.perf_counter() - started)
    return _answer(start_response, status, body, ROUTES.get(path, ""))


def served(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """The application as its own server runs it: connections past their age, or that failed a call,
    are dropped around each call, as Django's own request cycle does. None is checked before a call
    (no `SELECT 1`): one broken since fails that call, and the back-office looks its effect up."""
    close_old_connections()
    try:
        return application(environ, start_response)
    finally:
        close_old_connections()


def worker_started() -> threading.Thread:
    """What a serving process starts beside its threads, once: the sweeper of expired nonces, a daemon
    thread on its own database connection, so no call deletes another's nonces on its path."""
    sweeper = threading.Thread(target=_sweep_forever, name="receiver-nonce-sweeper", daemon=True)
    sweeper.start()
    return sweeper


def _sweep_forever() -> None:
    """Sweep expired nonces every `RECEIVER_NONCE_SWEEP_SECONDS`, for the life of the process; a sweep
    that fails is logged and tried again at the next."""
    every = max(1, int(getattr(settings, "RECEIVER_NONCE_SWEEP_SECONDS", 60)))
    while True:
        close_old_connections()
        try:
            swept = signing.sweep_nonces()
        except DatabaseFault as exc:  # (a connection lost reads as an InterfaceError, which is no DatabaseError)
            logger.warning("expired nonces not swept (%s); trying again in %s s", type(exc).__name__, every)
            connections[ALIAS].close()
        else:
            if swept:
                logger.debug("swept %s expired nonces", swept)
        time.sleep(every)


class BadLength(Exception):
    def __init__(self, status: int, message: str) -> None:
        self.status, self.message = status, message


def _length(text: str) -> int:
    """The body's length a call gives (`Content-Length`, digits only); else BadLength with its status."""
    if not text.isascii() or not text.isdigit():
        raise BadLength(400, f"Content-Length {text[:20]!r} is not a number of bytes: a call gives its body's length")
    if len(text) > len(str(protocol.MAX_BODY)) or int(text) > protocol.MAX_BODY:
        raise BadLength(413, f"a call's body is at most {protocol.MAX_BODY} bytes")
    return int(text)


def _handle(environ: dict[str, Any]) -> Answer:
    """One call, checked in this order, each refusal before anything is read further or written: the
    path and method, the body's length and type, the signature (verified, its nonce not yet taken),
    the JSON body and every field; then the call runs in ONE transaction that takes its nonce first.

    A call refused or rolled back (422, 409, a database error) takes its nonce back with it: a copy sent
    again within the signature's minute is checked again, and refused again by the same checks (or
    applied once: the operation id, the fence and the grant keep an effect once; the nonce only stops a
    captured call from being replayed, and a replayed refused call changes nothing). Two copies at once:
    the second waits on the nonce's unique index until the first ends, then is refused as replayed (the
    first committed) or runs (it rolled back)."""
    path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
    allowed = ROUTES.get(path)
    if allowed is None:
        return 404, {"error": f"no call {path[:100]!r} (this receiver speaks {protocol.PREFIX})"}
    if method != allowed:
        return 405, {"error": f"{path} takes {allowed} only"}
    if path == protocol.PREFIX:
        return 200, discovery()
    if path == protocol.PREFIX + "health":
        return health()
    if allowed == "GET":
        return 200, protocol.openapi()
    name = path.removeprefix(protocol.PREFIX)
    try:
        length = _length(environ.get("CONTENT_LENGTH") or "")
    except BadLength as exc:
        return exc.status, {"error": f"{name}: {exc.message}"}
    media = (environ.get("CONTENT_TYPE") or "").partition(";")[0].strip().lower()
    if media != protocol.CONTENT_TYPE:
        return 415, {"error": f"{name}: a call's body is {protocol.CONTENT_TYPE}, not {media[:60] or 'untyped'!r}"}
    raw = environ["wsgi.input"].read(length) if length else b""
    if len(raw) != length:
        return 400, {"error": f"{name}: the body ended after {len(raw)} of its {length} bytes"}
    try:
        nonce = signing.check_call(method, _url(environ), _headers(environ), raw)
        body = json.loads(raw)
        if not isinstance(body, dict):
            raise BadBody("the body is a JSON object")
        unknown = sorted(set(body) - TAKES[name])
        if unknown:
            takes = ", ".join(sorted(TAKES[name]))
            raise BadBody(f"{unknown[0][:40]!r} is not a field of this call (it takes {takes})")
        run = CALLS[name](body)
        with transaction.atomic(using=ALIAS):
            signing.take_nonce(nonce)
            return run()
    except signing.BadCall as exc:
        logger.warning("call refused: %s", exc)
        return 401, {"error": str(exc), "kind": exc.kind}
    except (BadBody, ValueError, RecursionError) as exc:
        return 400, {"error": f"{name}: {exc}"}
    except effects.Refused as exc:
        return 422, {"refused": {"kind": exc.kind, "message": exc.message}}
    except effects.Busy as exc:  # rolled back whole: nothing changed, the same operation may be sent again
        return 409, {"retry": {"kind": exc.kind, "message": f"nothing changed: {exc.message}; retry"}}
    except DatabaseError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if not connections[ALIAS].in_atomic_block:
            connections[ALIAS].close()
        return 503, {"error": f"the receiver could not reach its database ({type(exc).__name__}: {first})"}
