"""Signed grants: what the back-office authorizes, checkable by a system that cannot mint them.

A grant is `base64url(json payload) "." base64url(Ed25519 signature)`. The back-office signs
with its private key (`DELETION_GRANT_SIGNING_KEY`, 32 bytes, base64; in development derived
from `SECRET_KEY`); a receiving system holds only the public key, so it can check a grant
but never make one.
"""

from __future__ import annotations

import json
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings

from core import keys


class BadGrant(Exception):
    """Not a grant this back-office signed (tampered, truncated, or another key's)."""


def _private() -> Ed25519PrivateKey:
    return keys.signing_key(getattr(settings, "DELETION_GRANT_SIGNING_KEY", ""), "grant")


def private_key() -> Ed25519PrivateKey:
    """The back-office's signing key: it signs the grants, and the calls to receivers
    (`deletions.targets.http`), which check both with the one public key they were given."""
    return _private()


def public_key() -> str:
    """The key a receiving system is configured with (base64url of the raw public key)."""
    return keys.public_text(_private())


def receiver_key() -> str:
    """The public key a receiving system checks grants with: `TARGET_GRANT_PUBLIC_KEY`, or
    (development, one machine) the signing key's own."""
    return getattr(settings, "TARGET_GRANT_PUBLIC_KEY", "") or public_key()


def sign(payload: dict[str, Any]) -> str:
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return f"{keys.b64(body)}.{keys.b64(_private().sign(body))}"


def verify(token: str, public: str) -> dict[str, Any]:
    """The payload of a grant signed by the holder of `public`'s private key, or BadGrant."""
    try:
        body_text, signature = token.split(".")
        body = keys.unb64(body_text)
        keys.public(public).verify(keys.unb64(signature), body)
        payload = json.loads(body)
    except (ValueError, InvalidSignature, TypeError) as exc:
        raise BadGrant(f"not a grant signed by the back-office ({type(exc).__name__})") from None
    if not isinstance(payload, dict):
        raise BadGrant("a grant's payload is an object")
    return payload
