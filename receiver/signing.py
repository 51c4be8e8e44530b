"""Both signatures at the receiver: the back-office's on each call (RFC 9421, checked here, each
nonce taken once) and the receiver's own on the evidence it answers (a JWS the back-office checks).

Keys are Ed25519, written as unpadded base64url of the 32 raw bytes (a JWK's `x`). The receiver signs
with `RECEIVER_SIGNING_KEY` (in development derived from its `SECRET_KEY`) under `RECEIVER_KEY_ID`,
and accepts calls signed by the keys in `RECEIVER_CALLER_KEYS` (key id -> public key; by default the
back-office's grant key, which also signs the grants it checks).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import http_message_signatures as hms
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from django.conf import settings
from django.db import connections
from joserfc import jws
from joserfc.jwk import OKPKey

from core import grants, keys
from receiver import ALIAS, protocol

CALL_COMPONENTS = ("@method", "@target-uri", "content-digest")


class BadCall(Exception):
    """A call this receiver does not take from anyone: unsigned, stale, replayed or another key's."""


def _private() -> Any:
    return keys.signing_key(settings.RECEIVER_SIGNING_KEY, "receiver")


def key_id() -> str:
    return settings.RECEIVER_KEY_ID


def public_key() -> str:
    """This receiver's public key, as the back-office registers it."""
    return keys.public_text(_private())


def caller_keys() -> dict[str, str]:
    """Key id -> public key of each caller this receiver takes calls from."""
    return dict(settings.RECEIVER_CALLER_KEYS) or {"backoffice": grants.receiver_key()}


def evidence(payload: dict[str, Any]) -> str:
    """The payload as a compact JWS signed by this receiver. Ed25519 is deterministic and the JSON
    canonical, so the same evidence signs to the same text every time it is answered."""
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    key = OKPKey.import_key({"kty": "OKP", "crv": "Ed25519", "x": public_key(), "d": _seed()})
    return jws.serialize_compact(
        {"alg": protocol.EVIDENCE_ALGORITHM, "kid": key_id()}, body, key, algorithms=[protocol.EVIDENCE_ALGORITHM]
    )


def _seed() -> str:
    return keys.b64(_private().private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption()))


@dataclass
class _Request:
    """The view of an incoming call that http-message-signatures resolves components from."""

    method: str
    url: str
    headers: dict[str, str]


class _Keys(hms.HTTPSignatureKeyResolver):
    def __init__(self, known: dict[str, str]) -> None:
        self.known = known

    def resolve_public_key(self, key_id: str) -> Any:
        text = self.known.get(key_id)
        if text is None:
            raise BadCall(f"no caller key {key_id!r} is configured at this receiver")
        return keys.public(text)

    def resolve_private_key(self, key_id: str) -> Any:
        raise BadCall("the receiver signs no call")


def check_call(method: str, url: str, headers: dict[str, str], body: bytes) -> str:
    """The nonce of a call signed by a known caller, over this method, URL and body (its signature covers
    `CALL_COMPONENTS`), made within the last minute; else BadCall. Nothing is written: the nonce is taken
    (`take_nonce`) once the call's input is checked."""
    verifier = hms.HTTPMessageVerifier(signature_algorithm=hms.algorithms.ED25519, key_resolver=_Keys(caller_keys()))
    try:
        results = verifier.verify(
            _Request(method, url, headers),
            max_age=timedelta(seconds=protocol.SIGNATURE_MAX_AGE_SECONDS),
            require_components=CALL_COMPONENTS,
            body=body,
        )
    except (hms.HTTPMessageSignaturesException, KeyError, ValueError) as exc:
        raise BadCall(f"call refused: its signature does not verify ({exc})") from None
    params = results[0].parameters
    nonce = params.get("nonce")
    if not isinstance(nonce, str) or not 16 <= len(nonce) <= 64 or not isinstance(params.get("expires"), int):
        raise BadCall("call refused: a signed call carries a nonce (16 to 64 characters) and an expiry")
    return nonce


def take_nonce(nonce: str) -> None:
    """Take a call's nonce, in the receiver's database; BadCall if it was taken before (a replay). Kept past
    the age at which the signature itself is refused: a replay is refused by one or the other."""
    with connections[ALIAS].cursor() as cur:
        cur.execute(
            "WITH gone AS (DELETE FROM receiver_call_nonces WHERE kept_until < now()) "
            "INSERT INTO receiver_call_nonces (nonce, kept_until) VALUES (%s, now() + %s * interval '2 seconds') "
            "ON CONFLICT (nonce) DO NOTHING RETURNING nonce",
            [nonce, protocol.SIGNATURE_MAX_AGE_SECONDS],
        )
        if cur.fetchone() is None:
            raise BadCall("call refused: replayed (this nonce was used before)")


class BadKey(Exception):
    """A key in the receiver's settings that is not an Ed25519 key."""


def check_keys() -> None:
    """Every key this receiver signs or checks with reads as an Ed25519 key; else BadKey naming the setting."""
    try:
        public_key()
    except ValueError:
        raise BadKey(
            "RECEIVER_SIGNING_KEY is not an Ed25519 private key: 32 random bytes as unpadded base64url (43 characters)"
        ) from None
    for kid, text in caller_keys().items():
        try:
            keys.public(text)
        except (ValueError, TypeError):
            said = "RECEIVER_BACKOFFICE_KEY" if not settings.RECEIVER_CALLER_KEYS else f"caller key {kid!r}"
            raise BadKey(
                f"{said} is not an Ed25519 public key: the back-office's public key, 43 characters of base64url"
            ) from None
