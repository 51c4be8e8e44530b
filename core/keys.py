"""The back-office's Ed25519 keys, one per use (grants: `core.grants`, proofs: `core.proofs`): the
configured one, or (in development) derived from `SECRET_KEY` with the use's name (`wire.keys`,
where the keys' text forms live).
"""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings

from wire import keys


def signing_key(configured: str, use: str) -> Ed25519PrivateKey:
    """The private key `configured` names, else the one derived for `use` from SECRET_KEY."""
    return keys.signing_key(configured, settings.SECRET_KEY, use)
