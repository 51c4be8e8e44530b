"""Signed records: a case's proof, checkable later by anyone holding the back-office's public key.

A proof is `{"record": …, "digest": "sha256:<hex>", "sealed_at": <ISO time>, "signature": <base64url
Ed25519>, "key": <base64url public key>}`. The digest is over the record's canonical JSON (sorted
keys, no spaces, UTF-8); the signature is over the digest and the sealing time. The signing key is
`PROOF_SIGNING_KEY` (32 bytes, base64url), in development derived from `SECRET_KEY`; `verify` checks
against `PROOF_PUBLIC_KEY` (or the signing key's own public half), never against the key a file
carries, so a proof re-signed with another key fails. A kind whose record carries others' signatures
(a deletion's receipts, each under its receiver's key, which the record carries too) checks them as
well (`contents`), on their own: a record edited and re-signed with the back-office's key still fails.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings

from core.keys import signing_key
from wire import keys

FORMAT = "backoffice-proof/1"


def _private() -> Ed25519PrivateKey:
    return signing_key(getattr(settings, "PROOF_SIGNING_KEY", ""), "proof")


def public_key() -> str:
    """The key a proof is checked with: `PROOF_PUBLIC_KEY`, else the signing key's own."""
    configured = getattr(settings, "PROOF_PUBLIC_KEY", "")
    return configured or keys.public_text(_private())


def canonical(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def digest(record: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical(record)).hexdigest()


def _signed(digest_text: str, sealed_at: str) -> bytes:
    return f"{digest_text}|{sealed_at}".encode()


def seal(record: dict[str, Any], sealed_at: datetime) -> dict[str, Any]:
    """The record with its digest, when it was sealed, and the signature over both. The digest is
    the record's alone, so a closed case's proofs share it (its tombstone keeps it)."""
    record = json.loads(canonical(record))  # exactly what a reader will parse back
    text, at = digest(record), sealed_at.isoformat()
    return {
        "format": FORMAT,
        "record": record,
        "digest": text,
        "sealed_at": at,
        "signature": keys.b64(_private().sign(_signed(text, at))),
        "key": public_key(),
    }


def dumps(proof: dict[str, Any]) -> str:
    """The one way a proof is written to a file: `verify_file` refuses any other bytes."""
    return json.dumps(proof, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# A kind's own check of what its record says (a deletion's receipts): why it does not hold, or "".
Contents = Callable[[dict[str, Any]], str]


def verify_file(data: bytes, contents: Contents | None = None) -> str:
    """Why a saved proof is not intact, or "": it must read as written (`dumps`), byte for byte,
    and its record, digest and signature must agree (`verify`). Any changed byte fails one or the other."""
    try:
        proof = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return f"not a readable JSON proof ({exc})"
    if not isinstance(proof, dict):
        return f"not a proof ({FORMAT} expected)"
    why = verify(proof, contents)
    if why:
        return why
    if dumps(proof).encode("utf-8") != data:
        return "the file is not the proof as the back-office wrote it (its bytes were changed)"
    return ""


def verify(proof: Any, contents: Contents | None = None) -> str:
    """Why a proof is not intact, or "" when what its record carries holds (`contents`: the kind's own
    check, first, so it names what it finds whoever signed the whole), its digest matches its record
    and the back-office's key signed that digest."""
    if not isinstance(proof, dict) or proof.get("format") != FORMAT:
        return f"not a proof ({FORMAT} expected)"
    record, said, signature = proof.get("record"), proof.get("digest"), proof.get("signature")
    at = proof.get("sealed_at")
    if not (isinstance(record, dict) and isinstance(said, str) and isinstance(signature, str) and isinstance(at, str)):
        return "a proof holds a record, its digest, when it was sealed and its signature"
    why = contents(record) if contents is not None else ""
    if why:
        return why
    if proof.get("key") != public_key():
        return "the proof names another key than the back-office's"
    actual = digest(record)
    if actual != said:
        return f"the record does not match its digest (it reads {actual}, the proof says {said})"
    try:
        keys.public(public_key()).verify(keys.unb64(signature), _signed(said, at))
    except (ValueError, InvalidSignature):
        return "the signature is not the back-office's over this digest"
    return ""


_ISO = re.compile(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:\.\d+)?\+00:00")


def readable(line: str) -> str:
    """A proof's line as a person reads it: its ISO times to the second, in UTC (the record keeps
    them exact)."""
    return _ISO.sub(r"\1 \2 UTC", line)
