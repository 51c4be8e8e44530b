"""The evidence document: what a receiver says it did, as a compact JWS it signs and the back-office
verifies (alg `ALGORITHM`, `kid` the receiver's key id, the payload canonical JSON).

Ed25519 is deterministic and the JSON canonical, so the same evidence signs to the same text every time
it is answered. The back-office verifies by the key id the JWS names: an old key stays registered after a
rotation, so evidence signed before it still verifies.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from joserfc import jws
from joserfc.errors import JoseError
from joserfc.jwk import OKPKey

from wire import keys

ALGORITHM = "Ed25519"  # RFC 9864's name for EdDSA over Ed25519 (JWS)


class BadEvidence(Exception):
    """Evidence whose signature does not verify against the receiver's keys."""


def sign(payload: dict[str, Any], key: Ed25519PrivateKey, key_id: str) -> str:
    """The payload as a compact JWS signed with `key` under `key_id`."""
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    jwk = OKPKey.import_key({"kty": "OKP", "crv": "Ed25519", "x": keys.public_text(key), "d": keys.seed_text(key)})
    return jws.serialize_compact({"alg": ALGORITHM, "kid": key_id}, body, jwk, algorithms=[ALGORITHM])


def key_id(token: Any) -> str:
    """The key id a JWS names in its header (read, not verified); "" when unreadable."""
    try:
        return str(jws.extract_compact(str(token).encode()).headers().get("kid", ""))[:64]
    except (JoseError, ValueError, TypeError, AttributeError):
        return ""


@lru_cache(maxsize=64)
def _public(text: str) -> OKPKey:
    return OKPKey.import_key({"kty": "OKP", "crv": "Ed25519", "x": text})


def verify(token: Any, registered: dict[str, str]) -> dict[str, Any]:
    """The payload of a receiver's JWS, once it verifies against the key `registered` holds under the
    key id it names; else BadEvidence."""
    try:
        kid = jws.extract_compact(str(token).encode()).headers().get("kid")
        public = registered.get(str(kid))
        if public is None:
            raise BadEvidence(f"evidence signed under key {str(kid)[:40]!r}, which is not registered for this receiver")
        payload = json.loads(jws.deserialize_compact(str(token), _public(public), algorithms=[ALGORITHM]).payload)
    except (JoseError, ValueError, TypeError, AttributeError) as exc:
        raise BadEvidence(f"the receiver's evidence does not verify ({type(exc).__name__})") from None
    if not isinstance(payload, dict):
        raise BadEvidence("the receiver's evidence is no record")
    return payload
