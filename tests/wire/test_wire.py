"""What the back-office and a receiver agree on, each side's half against the other's: a grant signed
with one key checks with its public key only, a call signed for one URL checks there only, evidence
signed under a key id verifies against that id's key only. Pure: no database, no Django."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from wire import calls, evidence, grants, keys

KEY = keys.private(secrets.token_bytes(32))
OTHER = keys.private(secrets.token_bytes(32))
URL = "https://receiver.example/receiver/v1/apply"


def test_a_key_from_the_same_secret_and_use_is_the_same_key_and_another_use_another() -> None:
    assert keys.public_text(keys.derived("s", "grant")) == keys.public_text(keys.signing_key("", "s", "grant"))
    assert keys.public_text(keys.derived("s", "grant")) != keys.public_text(keys.derived("s", "proof"))
    seed = keys.seed_text(KEY)
    assert keys.public_text(keys.signing_key(seed, "ignored when configured", "grant")) == keys.public_text(KEY)


def test_a_grant_checks_with_its_public_key_and_no_other() -> None:
    token = grants.sign({"operation_id": "op-1", "epoch": 3}, KEY)
    assert grants.verify(token, keys.public_text(KEY)) == {"operation_id": "op-1", "epoch": 3}
    with pytest.raises(grants.BadGrant, match="not a grant signed by the back-office"):
        grants.verify(token, keys.public_text(OTHER))
    signature = token.split(".")[1]
    forged = keys.b64(b'{"epoch":4,"operation_id":"op-1"}')
    with pytest.raises(grants.BadGrant):
        grants.verify(f"{forged}.{signature}", keys.public_text(KEY))


def _signed(url: str, content: bytes, *, now: datetime | None = None) -> httpx.Request:
    request = httpx.Request("POST", url, content=content, headers={"Content-Type": "application/json"})
    calls.sign(request, content, key=KEY, key_id=calls.BACKOFFICE_KEY_ID, now=now or datetime.now(UTC))
    return request


def _check(request: httpx.Request, url: str, body: bytes, known: dict[str, str]) -> str:
    return calls.check(request.method, url, dict(request.headers), body, known)


KNOWN = {calls.BACKOFFICE_KEY_ID: keys.public_text(KEY)}


@pytest.mark.parametrize(
    ("checked_url", "checked_body", "known", "now_ago", "refused"),
    [
        # As signed: its nonce is the receiver's to take.
        (URL, b"{}", KNOWN, 0, ""),
        # Replayed at another receiver's URL: the signature covers @target-uri.
        ("https://other.example/receiver/v1/apply", b"{}", KNOWN, 0, "does not verify"),
        # Another body under the same signature: it covers content-digest.
        (URL, b'{"grant":"x"}', KNOWN, 0, "does not verify"),
        # Signed by a key this receiver does not know under that id.
        (URL, b"{}", {calls.BACKOFFICE_KEY_ID: keys.public_text(OTHER)}, 0, "does not verify"),
        # Under a key id the receiver has no key for.
        (URL, b"{}", {"someone": keys.public_text(KEY)}, 0, "no caller key 'backoffice'"),
        # Signed longer ago than a call lives.
        (URL, b"{}", KNOWN, calls.MAX_AGE_SECONDS + 5, "does not verify"),
    ],
)
def test_a_call_checks_only_as_it_was_signed(
    checked_url: str, checked_body: bytes, known: dict[str, str], now_ago: int, refused: str
) -> None:
    request = _signed(URL, b"{}", now=datetime.now(UTC) - timedelta(seconds=now_ago))
    if not refused:
        least, most = calls.NONCE_CHARS
        assert least <= len(_check(request, checked_url, checked_body, known)) <= most
        return
    with pytest.raises(calls.BadCall, match=refused):
        _check(request, checked_url, checked_body, known)


def test_evidence_verifies_under_the_key_id_it_names_and_signs_to_the_same_text() -> None:
    said = {"operation_id": "op-1", "deleted": {"posts": 3}}
    token = evidence.sign(said, KEY, "receiver-1")
    assert token == evidence.sign(said, KEY, "receiver-1")  # answered twice, the same text
    assert evidence.key_id(token) == "receiver-1"
    rotated = {"receiver-2": keys.public_text(OTHER), "receiver-1": keys.public_text(KEY)}
    assert evidence.verify(token, rotated) == said
    with pytest.raises(evidence.BadEvidence, match="not registered for this receiver"):
        evidence.verify(token, {"receiver-2": keys.public_text(KEY)})
    with pytest.raises(evidence.BadEvidence, match="does not verify"):
        evidence.verify(token, {"receiver-1": keys.public_text(OTHER)})
    assert evidence.key_id("not a jws") == ""


@pytest.mark.parametrize(("production", "dies"), [(False, True), (True, False)])
def test_a_crash_point_kills_a_real_process_except_in_production(production: bool, dies: bool) -> None:
    code = f"from wire.crashpoints import crash_point; crash_point('here', production={production}); print('alive')"
    ran = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "CRASH_AT": "here"}, capture_output=True, text=True, timeout=60
    )
    assert (ran.returncode == -9, "alive" in ran.stdout) == (dies, not dies), ran
