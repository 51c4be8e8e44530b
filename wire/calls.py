"""A call's signature (RFC 9421, Ed25519): what it covers, signed by the back-office, checked by a receiver.

The signature covers the method, the URL the call was signed for and the body's digest
(`COMPONENTS`), with `created`, `expires`, a nonce and the key id. A receiver refuses a call signed
longer ago than `MAX_AGE_SECONDS`, and one whose nonce it has taken before (its own database keeps
them); the back-office's key signs the calls and the grants alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import uuid4

import http_message_signatures as hms
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from wire import keys

COMPONENTS = ("@method", "@target-uri", "content-digest")
MAX_AGE_SECONDS = 60  # a call signed longer ago than this is refused, as is one signed twice
NONCE_CHARS = (16, 64)  # the length a call's nonce has, at least and at most
BACKOFFICE_KEY_ID = "backoffice"  # the key id the back-office signs under, unless a receiver names its callers


class BadCall(Exception):
    """A call a receiver takes from no one: unsigned, stale or another key's (`kind` "signature"), or
    replayed. The receiver's 401 says the kind, for the back-office draws different conclusions: a call
    refused for its signature applied nothing, and sending it again changes nothing until a person mends
    the key or the URL; a replayed one was sent before by something between, and that copy may have
    applied."""

    kind = "signature"


class Replayed(BadCall):
    """A call whose nonce the receiver took before: a copy of it reached the receiver first."""

    kind = "replayed"


class _Signer(hms.HTTPSignatureKeyResolver):
    def __init__(self, key: Ed25519PrivateKey) -> None:
        self.key = key

    def resolve_public_key(self, key_id: str) -> Any:
        raise KeyError(key_id)

    def resolve_private_key(self, key_id: str) -> Any:
        return self.key


def sign(request: Any, body: bytes, *, key: Ed25519PrivateKey, key_id: str, now: datetime) -> None:
    """Sign a request (an httpx request: its method, URL and headers) in place: `COMPONENTS`, with a
    fresh nonce, made `now` and good for `MAX_AGE_SECONDS`."""
    signer = hms.HTTPMessageSigner(signature_algorithm=hms.algorithms.ED25519, key_resolver=_Signer(key))
    signer.sign(
        request,
        key_id=key_id,
        created=now,
        expires=now + timedelta(seconds=MAX_AGE_SECONDS),
        nonce=uuid4().hex,
        covered_component_ids=COMPONENTS,
        body=body,
    )


@dataclass
class _Request:
    """The view of an incoming call that http-message-signatures resolves components from."""

    method: str
    url: str
    headers: dict[str, str]


class _Known(hms.HTTPSignatureKeyResolver):
    def __init__(self, known: dict[str, str]) -> None:
        self.known = known

    def resolve_public_key(self, key_id: str) -> Any:
        text = self.known.get(key_id)
        if text is None:
            raise BadCall(f"no caller key {key_id!r} is configured at this receiver")
        return keys.public(text)

    def resolve_private_key(self, key_id: str) -> Any:
        raise BadCall("the receiver signs no call")


def check(method: str, url: str, headers: dict[str, str], body: bytes, known: dict[str, str]) -> str:
    """The nonce of a call signed under one of the `known` keys (key id -> public key) over this method,
    URL and body (its signature covers `COMPONENTS`), made within the last `MAX_AGE_SECONDS`; else
    BadCall. Whether the nonce was taken before is the receiver's to say."""
    verifier = hms.HTTPMessageVerifier(signature_algorithm=hms.algorithms.ED25519, key_resolver=_Known(known))
    try:
        results = verifier.verify(
            _Request(method, url, headers),
            max_age=timedelta(seconds=MAX_AGE_SECONDS),
            require_components=COMPONENTS,
            body=body,
        )
    except (hms.HTTPMessageSignaturesException, KeyError, ValueError) as exc:
        raise BadCall(f"call refused: its signature does not verify ({exc})") from None
    params = results[0].parameters
    nonce = params.get("nonce")
    least, most = NONCE_CHARS
    if not isinstance(nonce, str) or not least <= len(nonce) <= most or not isinstance(params.get("expires"), int):
        raise BadCall(f"call refused: a signed call carries a nonce ({least} to {most} characters) and an expiry")
    return nonce
