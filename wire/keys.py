"""Ed25519 keys and their text form, for grants, calls, evidence and proofs.

A key is 32 bytes, written as unpadded base64url (a JWK's `x` for a public key, `d` for a private
one). Each use has its own private key: configured, or (in development) derived from a secret with
the use's name, so a grant key never signs a proof.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def signing_key(configured: str, secret: str, use: str) -> Ed25519PrivateKey:
    """The private key `configured` names (its seed's text form), else the one derived for `use` from
    `secret` (development: both sides derive the same keys from one development secret)."""
    return private(unb64(configured)) if configured else derived(secret, use)


def derived(secret: str, use: str) -> Ed25519PrivateKey:
    """The private key derived for `use` from `secret`."""
    return private(hashlib.sha256(f"{use}|{secret}".encode()).digest())


@lru_cache(maxsize=16)
def private(seed: bytes) -> Ed25519PrivateKey:
    """The key of a 32-byte seed, made once per process (each stage signs a grant)."""
    return Ed25519PrivateKey.from_private_bytes(seed)


@lru_cache(maxsize=16)
def public(text: str) -> Ed25519PublicKey:
    """The public key of its text form, made once per process (each effect checks a grant)."""
    return Ed25519PublicKey.from_public_bytes(unb64(text))


@lru_cache(maxsize=16)
def public_text(key: Ed25519PrivateKey) -> str:
    """The text form of a private key's public key (what the other side is configured with)."""
    return b64(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def seed_text(key: Ed25519PrivateKey) -> str:
    """The text form of a private key's seed (a JWK's `d`)."""
    return b64(key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption()))
