"""The back-office's grants (`wire.grants`: the format, the signature and its check), signed with its
key: `DELETION_GRANT_SIGNING_KEY` (32 bytes, base64url; in development derived from `SECRET_KEY`). A
receiving system holds only the public key, so it can check a grant but never make one.
"""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings

from wire import grants, keys

BadGrant = grants.BadGrant


def _private() -> Ed25519PrivateKey:
    return grants.signing_key(getattr(settings, "DELETION_GRANT_SIGNING_KEY", ""), settings.SECRET_KEY)


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
    """A grant of `payload`, signed with the back-office's key."""
    return grants.sign(payload, _private())


def verify(token: str, public: str) -> dict[str, Any]:
    """The payload of a grant signed by the holder of `public`'s private key, or BadGrant."""
    return grants.verify(token, public)
