"""The wire of the receiver protocol, version 1: paths, what each call takes and answers, and the
OpenAPI document the receiver serves. The back-office's adapter (`deletions.targets.http`) speaks the
same wire from this document, never by importing this module.

Every call but discovery, the metrics and this document is a POST of a JSON object (`Content-Type:
application/json`, its `Content-Length` given), signed by the back-office (RFC 9421; the signature
covers `@method`, `@target-uri` and `content-digest`, with `created`, `expires`, `nonce` and `keyid`;
Ed25519). Every refusal of the call itself is one JSON line `{"error": "..."}` and nothing was
written: 400 a request or body this call does not take (a malformed Content-Length or JSON, a field
missing, of the wrong type or unknown), 401 its signature (missing, not covering the components above,
stale, replayed, another key's), 404 / 405 no such call or method, 413 a body over `MAX_BODY`, 414 a
request line over `MAX_REQUEST_LINE`, 415 a body that is not JSON, 431 headers over
`MAX_HEADER_BYTES`. A refusal of the effect is 422 with `refused: {kind, message}` (nothing was
applied: a rule, a changed source, changed rules, a constraint of the application's database, data
that would remain); 409 with `retry: {kind, message}` says nothing changed and the same operation may
be sent again (a lock or statement timeout); 503 means the receiver could not reach its own database
(nothing can be concluded).
"""

from __future__ import annotations

from typing import Any

from wire import calls, evidence

VERSION = 1
PREFIX = f"/receiver/v{VERSION}/"
CALLS = ("inventory", "preview", "fence", "apply", "lookup", "withdraw")
METRICS = PREFIX + "metrics"  # unsigned, like discovery: counts, never a person
MAX_BODY = 64 * 1024  # a grant and its envelope are a few kB
MAX_REQUEST_LINE = 8 * 1024  # bytes: "POST /receiver/v1/apply HTTP/1.1" is 32
MAX_HEADER_BYTES = 16 * 1024  # all header fields together; a signed call's are under 1 kB
MAX_TARGET_CHARS = 240  # a prefix of up to 40 characters and a name of up to 200 (the back-office's bound)
MAX_COMMUNITIES = 10_000  # per inventory
CONTENT_TYPE = "application/json"
SIGNATURE_MAX_AGE_SECONDS = calls.MAX_AGE_SECONDS  # a call signed longer ago is refused, as is one signed twice
EVIDENCE_ALGORITHM = evidence.ALGORITHM  # RFC 9864's name for EdDSA over Ed25519 (JWS)


def public_url_problem(url: str) -> str:
    """Why `url` cannot be a receiver's public URL ("" when it can): the absolute http(s) URL the
    back-office registers and signs its calls for, ending with `PREFIX`, with no query or fragment."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (read for its check: a port that is not a number raises)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or not url.isprintable():
        return f"{url[:80]!r} is not an absolute http(s) URL"
    if parts.query or parts.fragment or not parts.path.endswith(PREFIX):
        return f"{url[:80]!r} must end with {PREFIX} (no query or fragment), as the back-office registers it"
    return ""


_OBJ = {"type": "object"}
_UUID = {"type": "string", "format": "uuid"}
_TARGET = {"type": "string", "minLength": 1, "maxLength": MAX_TARGET_CHARS}
_COUNT = {"type": "integer", "minimum": 1, "maximum": MAX_COMMUNITIES}
_REFUSED = {
    "description": "refused: nothing was applied",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["refused"],
                "properties": {
                    "refused": {
                        "type": "object",
                        "required": ["kind", "message"],
                        "properties": {"kind": {"type": "string"}, "message": {"type": "string"}},
                    }
                },
            }
        }
    },
}
_RETRY = {
    "description": "nothing changed: the effect's transaction rolled back (a lock or statement timeout, a conflict, "
    "or the same operation still running); send the same operation again later",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["retry"],
                "properties": {
                    "retry": {
                        "type": "object",
                        "required": ["kind", "message"],
                        "properties": {"kind": {"type": "string"}, "message": {"type": "string"}},
                    }
                },
            }
        }
    },
}
_JWS = {
    "type": "string",
    "description": "a compact JWS (alg Ed25519, kid the receiver's key id) whose payload is the evidence JSON",
}


def _error(description: str) -> dict[str, Any]:
    """A refusal of the call itself: one JSON line saying why."""
    schema = {**_OBJ, "required": ["error"], "properties": {"error": {"type": "string"}}}
    return {"description": description, "content": {CONTENT_TYPE: {"schema": schema}}}


def _call(
    summary: str, body: dict[str, Any], answer: dict[str, Any], *, refusable: bool = False, retryable: bool = False
) -> dict[str, Any]:
    responses: dict[str, Any] = {
        "200": {"description": "the answer", "content": {"application/json": {"schema": answer}}},
        "400": _error("a request or body this call does not take (Content-Length, JSON, a field): nothing written"),
        "401": _error(
            "the call's signature is missing, does not cover @method, @target-uri and content-digest, is stale "
            "or not the back-office's (kind 'signature'), or replayed (kind 'replayed'): nothing written"
        ),
        "413": _error(f"a body over {MAX_BODY} bytes: nothing read or written"),
        "415": _error(f"a body that is not {CONTENT_TYPE}: nothing read or written"),
        "503": _error("the receiver could not read its own database: nothing can be concluded"),
    }
    if refusable:
        responses["422"] = _REFUSED
    if retryable:
        responses["409"] = _RETRY
    return {
        "post": {
            "summary": summary,
            "requestBody": {"required": True, "content": {CONTENT_TYPE: {"schema": body}}},
            "responses": responses,
            "security": [{"httpMessageSignature": []}],
        }
    }


def _obj(required: list[str], **properties: Any) -> dict[str, Any]:
    return {**_OBJ, "required": required, "properties": properties, "additionalProperties": False}


def openapi() -> dict[str, Any]:
    """The protocol as an OpenAPI 3.1 document (served at `PREFIX + "openapi.json"`)."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "Deletion receiver protocol", "version": str(VERSION)},
        "components": {
            "securitySchemes": {
                "httpMessageSignature": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "Signature",
                    "description": "RFC 9421 over @method, @target-uri and content-digest; Ed25519; created, "
                    f"expires and nonce required; refused older than {SIGNATURE_MAX_AGE_SECONDS} s or seen before",
                }
            }
        },
        "paths": {
            PREFIX: {
                "get": {
                    "summary": "discovery: the protocol version, the capabilities this receiver enforces, its keys",
                    "responses": {"200": {"description": "the receiver's declaration"}},
                }
            },
            PREFIX + "metrics": {
                "get": {
                    "summary": "this receiver's counts for Prometheus: calls by call and status, refusals by kind, "
                    "apply latency, applies and the rows they changed (names no person)",
                    "responses": {
                        "200": {
                            "description": "Prometheus' text exposition format",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        }
                    },
                }
            },
            PREFIX + "health": {
                "get": {
                    "summary": "health: its database reachable, the installed dataset's name, version and digest, "
                    "its schema version, what its database has applied (`state`: a JWS of "
                    "{receiver_state: {incarnation, applied}}; a restore of its database shows as less), and its "
                    "bound on a call (`statement_timeout_ms`: the back-office's read timeout must be longer)",
                    "responses": {
                        "200": {"description": "healthy"},
                        "503": _error("the receiver could not reach its own database"),
                    },
                }
            },
            PREFIX + "inventory": _call(
                "the person's communities and roles",
                _obj(["target", "communities"], target=_TARGET, communities=_COUNT),
                _obj(["communities"], communities={"type": "array"}),
            ),
            PREFIX + "preview": _call(
                "per community: name, rows, agents and data version, read now",
                _obj(
                    ["target", "community_ids"],
                    target=_TARGET,
                    community_ids={"type": "array", "items": _UUID},
                ),
                _obj(["communities"], communities=_OBJ),
            ),
            PREFIX + "fence": _call(
                "the highest lease generation seen for a request",
                _obj(["request_id"], request_id=_UUID),
                _obj(["generation"], generation={"type": "integer"}),
            ),
            PREFIX + "apply": _call(
                "apply the effect a signed grant authorizes, once per operation id; the same operation again "
                "answers the same signed evidence",
                _obj(["grant"], grant={"type": "string"}),
                _obj(["evidence"], evidence=_JWS),
                refusable=True,
                retryable=True,
            ),
            PREFIX + "lookup": _call(
                "what was recorded for an operation, as of a watermark",
                _obj(["operation_id"], operation_id=_UUID),
                {
                    **_OBJ,
                    "oneOf": [
                        _obj(["found"], found=_JWS),
                        _obj(["not_found"], not_found={**_JWS, "description": "a JWS of {operation_id, watermark}"}),
                        _obj(["unreadable"], unreadable={"type": "string"}),
                    ],
                },
                refusable=True,
            ),
            PREFIX + "withdraw": _call(
                "raise a request's minimum authority epoch, as a signed withdrawal says",
                _obj(["withdrawal"], withdrawal={"type": "string"}),
                _obj(["acknowledged"], acknowledged={**_JWS, "description": "a JWS of {withdrawal, epoch}"}),
                refusable=True,
            ),
        },
    }
