"""Both signatures at the receiver: the back-office's on each call (RFC 9421, checked here, each
nonce taken once) and the receiver's own on the evidence it answers (a JWS the back-office checks); how
each is made and checked is what both sides agree on (`wire.calls`, `wire.evidence`).

Keys are Ed25519, written as unpadded base64url of the 32 raw bytes (a JWK's `x`). The receiver signs
with `RECEIVER_SIGNING_KEY` (in development derived from its `SECRET_KEY`) under `RECEIVER_KEY_ID`,
and accepts calls signed by the keys in `RECEIVER_CALLER_KEYS` (key id -> public key; by default the
back-office's grant key, which also signs the grants it checks).
"""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.db import connections

from receiver import ALIAS, protocol
from wire import calls, grants, keys
from wire import evidence as jws

BadCall = calls.BadCall  # a call this receiver takes from no one (`check_call`, `take_nonce`)


def _private() -> Ed25519PrivateKey:
    return keys.signing_key(settings.RECEIVER_SIGNING_KEY, settings.SECRET_KEY, "receiver")


def key_id() -> str:
    return settings.RECEIVER_KEY_ID


def public_key() -> str:
    """This receiver's public key, as the back-office registers it."""
    return keys.public_text(_private())


def backoffice_key() -> str:
    """The back-office's public key, which checks its grants and (by default) its calls:
    `RECEIVER_BACKOFFICE_KEY`, or (development, one machine) the development back-office's own."""
    configured = settings.TARGET_GRANT_PUBLIC_KEY
    return configured or keys.public_text(grants.signing_key(settings.DELETION_GRANT_SIGNING_KEY, settings.SECRET_KEY))


def caller_keys() -> dict[str, str]:
    """Key id -> public key of each caller this receiver takes calls from."""
    return dict(settings.RECEIVER_CALLER_KEYS) or {calls.BACKOFFICE_KEY_ID: backoffice_key()}


def evidence(payload: dict[str, Any]) -> str:
    """The payload as evidence signed by this receiver (`wire.evidence`): the same evidence signs to the
    same text every time it is answered."""
    return jws.sign(payload, _private(), key_id())


def check_call(method: str, url: str, headers: dict[str, str], body: bytes) -> str:
    """The nonce of a call signed by a known caller over this method, URL and body (`wire.calls.check`);
    else BadCall. Nothing is written: the nonce is taken (`take_nonce`) once the call's input is checked."""
    return calls.check(method, url, headers, body, caller_keys())


# A call's nonce, inserted once, first in the call's own transaction (`http._handle`): a copy of the call
# waits on its unique index until that transaction ends, then finds it taken (committed) or takes it (rolled
# back); it locks no other call's nonce
# ({table}: the receiver's table, schema-qualified where the connection's search path does not find it).
TAKE_NONCE = (
    "INSERT INTO {table} (nonce, kept_until) VALUES (%s, now() + %s * interval '2 seconds') "
    "ON CONFLICT (nonce) DO NOTHING RETURNING nonce"
)
# Expired nonces, a batch at a time, skipping any row another transaction holds: the sweep waits on no call.
SWEEP_NONCES = (
    "DELETE FROM receiver_call_nonces WHERE nonce IN (SELECT nonce FROM receiver_call_nonces "
    "WHERE kept_until < now() LIMIT %s FOR UPDATE SKIP LOCKED)"
)
SWEEP_BATCH = 5000


def take_nonce(nonce: str) -> None:
    """Take a call's nonce, in the caller's transaction (the call's own, with what the call does: a call
    rolled back takes its nonce back); Replayed if it was taken before (a replay). Kept past
    the age at which the signature itself is refused: a replay is refused by one or the other. Expired
    nonces are swept beside the calls (`sweep_nonces`), never on their path."""
    with connections[ALIAS].cursor() as cur:
        cur.execute(TAKE_NONCE.format(table="receiver_call_nonces"), [nonce, protocol.SIGNATURE_MAX_AGE_SECONDS])
        if cur.fetchone() is None:
            raise calls.Replayed("call refused: replayed (this nonce was used before)")


def sweep_nonces() -> int:
    """Delete the nonces kept past their time, a batch per transaction (autocommit), and say how many."""
    swept = 0
    with connections[ALIAS].cursor() as cur:
        while True:
            cur.execute(SWEEP_NONCES, [SWEEP_BATCH])
            swept += cur.rowcount
            if cur.rowcount < SWEEP_BATCH:
                return swept


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
