"""Signed grants: what the back-office authorizes, checkable by a system that cannot mint them.

A grant is `base64url(json payload) "." base64url(Ed25519 signature)`, the JSON canonical (sorted
keys, no spaces). The back-office signs with its private key; a receiver holds only the public key,
so it can check a grant but never make one. The same key signs the back-office's calls (`calls`).
"""

from __future__ import annotations

import json
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from wire import keys

USE = "grant"  # the use the back-office's key is derived for in development (`keys.signing_key`)


class BadGrant(Exception):
    """Not a grant the back-office signed (tampered, truncated, or another key's)."""


def signing_key(configured: str, secret: str) -> Ed25519PrivateKey:
    """The back-office's grant key: the configured one, else (development) derived from `secret`."""
    return keys.signing_key(configured, secret, USE)


def sign(payload: dict[str, Any], key: Ed25519PrivateKey) -> str:
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return f"{keys.b64(body)}.{keys.b64(key.sign(body))}"


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
