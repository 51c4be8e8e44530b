"""The receiver's HTTP face: a WSGI application for `/receiver/v1/` (`protocol.py`).

Each call: check its signature and nonce (`signing.check_call`), parse the JSON body, call the
backend (`demo_target.system`) once, answer JSON; the evidence of `apply` and `lookup` is signed by
this receiver (`signing.evidence`). Nothing else happens here: every check on the effect itself runs
in the backend's transaction.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connections

from core.crashpoints import crash_point
from demo_target import system
from demo_target.router import ALIAS
from receiver import protocol, signing

logger = logging.getLogger("receiver")

CAPABILITIES = {
    "fences_stale_owners": True,
    "checks_expected_version": True,
    "idempotent_per_operation": True,
    "lookups_can_lag": True,
}

StartResponse = Callable[..., Any]


def backend() -> Any:
    """What this receiver serves: an application's database described by a dataset file
    (`RECEIVER_DATASET`), or the demo target system."""
    if getattr(settings, "RECEIVER_DATASET", ""):
        from receiver.dataset import backend as dataset

        return dataset
    return system


class BadBody(Exception):
    pass


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


def _refused(exc: system.Refused) -> tuple[int, dict[str, Any]]:
    return 422, {"refused": {"kind": exc.kind, "message": exc.message}}


def inventory(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    communities = _field(body, "communities", int)
    if not 1 <= communities <= 10_000:
        raise BadBody("'communities' must be 1 to 10000")
    try:
        return 200, {"communities": backend().memberships(_field(body, "target", str), communities)}
    except system.Refused as exc:
        return _refused(exc)


def preview(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    ids = _field(body, "community_ids", list)
    if not all(isinstance(i, str) for i in ids):
        raise BadBody("'community_ids' must be a list of strings")
    target = _field(body, "target", str)
    backend().enroll(target)
    return 200, {"communities": backend().preview(target, ids)}


def fence(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return 200, {"generation": backend().fence(_uuid(body, "request_id"))}


def apply(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    try:
        evidence = backend().apply(_field(body, "grant", str))
    except system.Refused as exc:
        return _refused(exc)
    except system.Busy as exc:  # rolled back whole: nothing changed, the same operation may be sent again
        return 409, {"retry": {"kind": exc.kind, "message": f"nothing changed: {exc.message}; retry"}}
    crash_point("receiver-after-commit")  # applied and committed; the answer is not sent yet
    return 200, {"evidence": signing.evidence(evidence)}


def lookup(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    try:
        answer = backend().lookup(_uuid(body, "operation_id"))
    except system.Unreadable as exc:
        return 200, {"unreadable": str(exc)}
    except system.Refused as exc:
        return _refused(exc)
    if isinstance(answer, system.Found):
        return 200, {"found": signing.evidence(answer.evidence)}
    # Signed too: "not applied as of this watermark" lets the back-office send the operation again.
    return 200, {
        "not_found": signing.evidence({"operation_id": body["operation_id"], "watermark": answer.watermark.isoformat()})
    }


def withdraw(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    try:
        epoch = backend().withdraw(_field(body, "withdrawal", str))
        # Signed: an acknowledged withdrawal is no longer pushed, so only the receiver may say it enforces it.
        return 200, {"acknowledged": signing.evidence({"withdrawal": body["withdrawal"], "epoch": epoch})}
    except system.Refused as exc:
        return _refused(exc)


CALLS: dict[str, Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]] = {
    "inventory": inventory,
    "preview": preview,
    "fence": fence,
    "apply": apply,
    "lookup": lookup,
    "withdraw": withdraw,
}


def discovery() -> dict[str, Any]:
    return {
        "protocol": "deletion-receiver",
        "version": protocol.VERSION,
        "name": backend().name() if backend() is not system else "demo target system",
        "capabilities": CAPABILITIES,
        "key_id": signing.key_id(),
        "keys": {signing.key_id(): signing.public_key()},
        "calls": list(protocol.CALLS),
    }


def _url(environ: dict[str, Any]) -> str:
    host = environ.get("HTTP_HOST") or f"{environ['SERVER_NAME']}:{environ['SERVER_PORT']}"
    query = f"?{environ['QUERY_STRING']}" if environ.get("QUERY_STRING") else ""
    return f"{environ.get('wsgi.url_scheme', 'http')}://{host}{environ.get('PATH_INFO', '')}{query}"


def _headers(environ: dict[str, Any]) -> dict[str, str]:
    found = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
    if environ.get("CONTENT_TYPE"):
        found["content-type"] = environ["CONTENT_TYPE"]
    return found


def _answer(start_response: StartResponse, status: int, body: dict[str, Any]) -> Iterable[bytes]:
    data = json.dumps(body, separators=(",", ":")).encode()
    reasons = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed"}
    reasons |= {409: "Conflict", 413: "Content Too Large", 422: "Unprocessable Content", 503: "Service Unavailable"}
    start_response(
        f"{status} {reasons[status]}", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    )
    return [data]


def application(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    status, body = _handle(environ)
    return _answer(start_response, status, body)


def served(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """The application as its own server runs it: connections past their age or broken are dropped
    around each call, as Django's own request cycle does."""
    close_old_connections()
    try:
        return application(environ, start_response)
    finally:
        close_old_connections()


def _handle(environ: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
    if path == protocol.PREFIX and method == "GET":
        return 200, discovery()
    if path == protocol.PREFIX + "openapi.json" and method == "GET":
        return 200, protocol.openapi()
    name = path.removeprefix(protocol.PREFIX)
    if not path.startswith(protocol.PREFIX) or name not in CALLS:
        return 404, {"error": f"no call {path!r} (this receiver speaks {protocol.PREFIX})"}
    if method != "POST":
        return 405, {"error": f"{name} is a POST"}
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 400, {"error": "Content-Length is not a number"}
    if length > protocol.MAX_BODY:
        return 413, {"error": f"a call's body is at most {protocol.MAX_BODY} bytes"}
    raw = environ["wsgi.input"].read(length) if length else b""
    try:
        signing.check_call(method, _url(environ), _headers(environ), raw)
        body = json.loads(raw)
        if not isinstance(body, dict):
            raise BadBody("the body is a JSON object")
        return CALLS[name](body)
    except signing.BadCall as exc:
        logger.warning("call refused: %s", exc)
        return 401, {"error": str(exc)}
    except (BadBody, ValueError) as exc:
        return 400, {"error": f"{name}: {exc}"}
    except DatabaseError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if not connections[ALIAS].in_atomic_block:
            connections[ALIAS].close()
        return 503, {"error": f"the receiver could not reach its database ({type(exc).__name__}: {first})"}
