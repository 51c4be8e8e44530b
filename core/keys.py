"""Ed25519 keys and their text form, shared by grants (`core.grants`) and proofs (`core.proofs`).

A key is 32 bytes, written as unpadded base64url. Each use has its own: configured, or (in
development) derived from `SECRET_KEY` with the use's name, so a grant key never signs a proof.
"""

from __future__ import annotations

import base64
import hashlib
import json
from functools import lru_cache

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def signed_by(token: object) -> str:
    """The key id a compact JWS names in its header (read, not verified: for a person reading it)."""
    try:
        return str(json.loads(unb64(str(token).split(".")[0])).get("kid", "?"))[:64]
    except (ValueError, AttributeError):
        return "unreadable"


def signing_key(configured: str, use: str) -> Ed25519PrivateKey:
    """The private key `configured` names, else the one derived for `use` from SECRET_KEY."""
    seed = unb64(configured) if configured else hashlib.sha256(f"{use}|{settings.SECRET_KEY}".encode()).digest()
    return _private(seed)


@lru_cache(maxsize=16)
def _private(seed: bytes) -> Ed25519PrivateKey:
    """The key of a seed, made once per process (each stage signs a grant)."""
    return Ed25519PrivateKey.from_private_bytes(seed)


@lru_cache(maxsize=16)
def public(text: str) -> Ed25519PublicKey:
    """The public key of its text form, made once per process (each effect checks a grant)."""
    return Ed25519PublicKey.from_public_bytes(unb64(text))


@lru_cache(maxsize=16)
def public_text(key: Ed25519PrivateKey) -> str:
    return b64(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))
