"""The adapter for a receiver reached over HTTP (the receiver protocol, version 1).

A registered target system (`models.TargetSystem`: name, prefix, base URL, the receiver's public
keys, timeouts) is reached with httpx and explicit connect / read timeouts. Every call is signed
with the back-office's key (RFC 9421 over the method, the URL and the body's digest, with a nonce
and a one-minute expiry); every answer that carries evidence is believed only once its JWS verifies
against a key registered for the receiver (under the key id it names, so evidence signed before a
key rotation still verifies). What a fault means:

- `apply` with no answer (a timeout, a reset, a 5xx, an answer that is no JSON or whose signature does
  not verify): the effect is unknown and is settled by `lookup`, never resent blind;
- `lookup` with no answer: `Unreadable`; a lookup whose evidence does not verify: refused (`tampered`,
  an integrity fault), nothing believed;
- a 422: refused by the receiver, nothing applied; a 401: the receiver refused the call itself;
- an `apply` answered 409 with a `retry` body: nothing changed there (its transaction rolled back on a
  lock or statement timeout, or the same operation is still running), `TargetBusy`: a plain failed
  attempt, retried with the normal backoff, no effect in question.

Capabilities are what the receiver declares at discovery (`GET /receiver/v1/`), read once a minute
per process, never assumed. Whether it answers at all, with a key registered for it, is what health
reads (`reach`: a discovery with short timeouts, at most every 30 s per process).
"""

from __future__ import annotations

import dataclasses
import json
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import httpx
from django.conf import settings
from django.utils.module_loading import import_string

from core import clock, grants
from deletions.errors import Refused
from deletions.targets.base import (
    CALL_REFUSED,
    Capabilities,
    Found,
    Lookup,
    NotFound,
    TargetBusy,
    TargetRefused,
    TargetUnreachable,
    Unreadable,
)
from wire import bounds, calls, evidence
from wire.evidence import BadEvidence

VERSION = 1
# The statuses of a call the receiver checked and refused before it wrote anything (the protocol's
# document): that call applied nothing. A 401 for a replayed nonce is not one of them: a copy of the
# call reached the receiver first, and that copy may have applied.
REFUSED_WHOLE = frozenset({400, 401, 404, 405, 413, 414, 415, 431})
DISCOVERY_SECONDS = 60.0
REACH_SECONDS = 30.0  # health's discovery, per receiver and process
REACH_CONNECT_SECONDS = 1.0  # health's discovery waits at most this long for a connection
REACH_READ_SECONDS = 2.0  # and this long for the answer


@dataclass(frozen=True)
class State:
    """What a receiver's database has applied: its incarnation (made at its install) and the number of
    its last operation newly applied. A restore of that database from a backup shows as less."""

    incarnation: str
    applied: int


def state_in(said: Any) -> State | None:
    """The `receiver_state` a receiver's signed answer carries (an effect's evidence, a lookup's "not
    found", its health), or None: a receiver that keeps none (the demo path) says nothing of it."""
    found = said.get("receiver_state") if isinstance(said, dict) else None
    if not isinstance(found, dict):
        return None
    incarnation, applied = found.get("incarnation"), found.get("applied")
    if not isinstance(incarnation, str) or not isinstance(applied, int) or isinstance(applied, bool):
        return None
    return State(incarnation[:64], applied)


def went_back(held: State | None, reported: State | None, where: str) -> str:
    """Why a receiver's database went back in time ("" when it did not): it reports another incarnation
    than the one the back-office holds evidence of, or fewer applied operations. Pure."""
    if held is None or not held.incarnation or reported is None:
        return ""
    if reported.incarnation != held.incarnation:
        return (
            f"{where} went back in time: it reports incarnation {reported.incarnation} with {reported.applied} "
            f"applied operations, the back-office holds signed evidence of {held.applied} in incarnation "
            f"{held.incarnation}"
        )
    if reported.applied < held.applied:
        return (
            f"{where} went back in time: it reports {reported.applied} applied operations, the back-office holds "
            f"signed evidence of {held.applied}"
        )
    return ""


@dataclass(frozen=True)
class Registration:
    """What the back-office knows of a receiver, from its `TargetSystem` row."""

    name: str
    prefix: str
    base_url: str  # ends with /receiver/v1/
    keys: dict[str, str]  # key id -> public key (base64url, 32 bytes)
    connect_timeout: float
    read_timeout: float
    unanswered_since: datetime | None = None  # noted when it did not answer, until it answers again
    unanswered_reason: str = ""
    state: State | None = None  # what its database has applied, as far as the back-office holds evidence

    def where(self) -> str:
        return f"{self.name} at {self.base_url}"


_clients: dict[tuple[str, float, float, str], httpx.Client] = {}
_discovered: dict[tuple[str, str, str], tuple[float, Capabilities]] = {}
_reached: dict[tuple[str, str, str], tuple[float, str]] = {}
_lock = threading.Lock()


def trusted() -> ssl.SSLContext | bool:
    """How a receiver's TLS certificate is checked: against the CA certificates in `RECEIVER_CA_FILE`
    when it is set (a private CA, or a receiver's self-signed certificate), else the public ones."""
    cafile = getattr(settings, "RECEIVER_CA_FILE", "")
    return ssl.create_default_context(cafile=cafile) if cafile else True


def _client(r: Registration) -> httpx.Client:
    """One client per receiver and process (its connections are kept), or, where the settings mount the
    receiver in this process (`RECEIVER_IN_PROCESS`: the test suite and the chaos run), one that hands
    the same signed requests to its WSGI application."""
    mounted = getattr(settings, "RECEIVER_IN_PROCESS", "")
    key = (r.base_url, r.connect_timeout, r.read_timeout, mounted)
    with _lock:
        if key not in _clients:
            timeout = httpx.Timeout(r.read_timeout, connect=r.connect_timeout)
            transport = httpx.WSGITransport(app=import_string(mounted)) if mounted else None
            _clients[key] = httpx.Client(timeout=timeout, transport=transport, verify=trusted())
        return _clients[key]


def verify_evidence(token: str, registered: dict[str, str]) -> dict[str, Any]:
    """The evidence a receiver signed, once its JWS verifies against the registered key it names
    (`wire.evidence.verify`: the one check, which every read of saved evidence makes too); the JWS
    itself kept beside it (`receipt`)."""
    return {**evidence.verify(token, registered), "receipt": token}


def health(r: Registration, *, short: bool = False) -> State | None:
    """The receiver's health answer (`GET .../health`): what its database has applied, once its signed
    state verifies against a key registered for it (None when it keeps none); TargetUnreachable when it
    does not answer, cannot reach its database, or signs what does not verify."""
    return _state_said(r, _health(r, short=short))


def waits_too_little(r: Registration, said: dict[str, Any]) -> str:
    """Why the back-office gives up on this receiver too early ("" when it does not): its read timeout
    is not above the bound the receiver states on a call, with the margin (`wire.bounds.too_short`)."""
    stated = said.get("statement_timeout_ms")
    if not isinstance(stated, int) or isinstance(stated, bool):
        return ""  # (a receiver that states none: nothing to check it against)
    why = bounds.too_short(r.read_timeout, stated)
    return f"{r.where()}: {why}" if why else ""


def _health(r: Registration, *, short: bool = False) -> dict[str, Any]:
    """The receiver's health answer, as it said it (200, a JSON object); else TargetUnreachable."""
    reg = (
        dataclasses.replace(
            r,
            connect_timeout=min(r.connect_timeout, REACH_CONNECT_SECONDS),
            read_timeout=min(r.read_timeout, REACH_READ_SECONDS),
        )
        if short
        else r
    )
    try:
        answer = _client(reg).get(r.base_url + "health")
        said = answer.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise TargetUnreachable(f"{r.where()} did not answer health ({type(exc).__name__}: {exc})") from None
    if answer.status_code != 200 or not isinstance(said, dict):
        error = said.get("error") if isinstance(said, dict) else None
        raise TargetUnreachable(f"{r.where()} is not healthy (HTTP {answer.status_code}: {str(error)[:300]})")
    return said


def _state_said(r: Registration, said: dict[str, Any]) -> State | None:
    if "state" not in said:
        return None
    try:
        return state_in(evidence.verify(said["state"], r.keys))
    except BadEvidence as exc:
        raise TargetUnreachable(f"{r.where()} reports a state that does not verify: {exc}") from None


@dataclass(frozen=True)
class Declared:
    """What a receiver says of itself at discovery (`GET /receiver/v1/`)."""

    capabilities: Capabilities
    key_id: str  # the key it signs with now
    keys: dict[str, str]


def discover(client: httpx.Client, url: str, name: str) -> Declared:
    """The receiver's declaration, or TargetUnreachable (no answer, or another protocol's)."""
    try:
        answer = client.get(url)
        declared = answer.json() if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError) as exc:
        raise TargetUnreachable(f"{name} at {url} did not answer discovery ({type(exc).__name__}: {exc})") from None
    if not isinstance(declared, dict) or declared.get("version") != VERSION:
        raise TargetUnreachable(f"{name} at {url} does not speak version {VERSION} of the receiver protocol")
    c: dict[str, Any] = declared["capabilities"] if isinstance(declared.get("capabilities"), dict) else {}
    keys: dict[str, Any] = declared["keys"] if isinstance(declared.get("keys"), dict) else {}
    return Declared(
        capabilities=Capabilities(**{f: c.get(f) is True for f in Capabilities.__dataclass_fields__}),
        key_id=str(declared.get("key_id", "")),
        keys={str(k): str(v) for k, v in keys.items()},
    )


def unregistered_key(declared: Declared, r: Registration) -> str:
    """Why a receiver's declaration does not match its registration ("" when it does): it signs now
    under a key id registered for it, with the public key registered under that id."""
    if declared.key_id not in r.keys:
        return (
            f"{r.where()} signs with key {declared.key_id[:64]!r}, which is not registered for it "
            f"(registered: {', '.join(sorted(r.keys))})"
        )
    if declared.keys.get(declared.key_id, r.keys[declared.key_id]) != r.keys[declared.key_id]:
        return f"{r.where()} declares another public key under {declared.key_id!r} than the one registered"
    return ""


def _cache_key(r: Registration) -> tuple[str, str, str]:
    return (r.base_url, json.dumps(r.keys, sort_keys=True), getattr(settings, "RECEIVER_IN_PROCESS", ""))


def reach(r: Registration) -> str:
    """Why the receiver cannot be reached now ("" when it answers discovery under a registered key):
    asked with short timeouts (health reads it) at most every REACH_SECONDS per process."""
    key = _cache_key(r)
    seen = _reached.get(key)
    if seen is not None and time.monotonic() - seen[0] < REACH_SECONDS:
        return seen[1]
    short = dataclasses.replace(
        r,
        connect_timeout=min(r.connect_timeout, REACH_CONNECT_SECONDS),
        read_timeout=min(r.read_timeout, REACH_READ_SECONDS),
    )
    try:
        declared = discover(_client(short), r.base_url, r.name)
    except TargetUnreachable as exc:
        why = exc.message
    else:
        why = unregistered_key(declared, r)
        if not why:
            _discovered[key] = (time.monotonic(), declared.capabilities)
    _reached[key] = (time.monotonic(), why)
    return why


_rewound: dict[tuple[str, ...], tuple[float, State | None, str, str]] = {}


def _read(r: Registration) -> tuple[State | None, str, str]:
    """The receiver's health, read with short timeouts at most every REACH_SECONDS per process (per
    state held and read timeout): what its database has applied, why it could not be read, and why the
    back-office waits too little for it (`waits_too_little`)."""
    key = (*_cache_key(r), str(r.read_timeout), *((r.state.incarnation, str(r.state.applied)) if r.state else ()))
    seen = _rewound.get(key)
    if seen is not None and time.monotonic() - seen[0] < REACH_SECONDS:
        return seen[1], seen[2], seen[3]
    try:
        said = _health(r, short=True)
        state, why, slow = _state_said(r, said), "", waits_too_little(r, said)
    except TargetUnreachable as exc:
        state, why, slow = None, exc.message, ""
    _rewound[key] = (time.monotonic(), state, why, slow)
    return state, why, slow


def reported(r: Registration) -> tuple[State | None, str]:
    """What the receiver's health reports its database has applied, and why it could not be read ("" when
    it was): read with short timeouts, at most every REACH_SECONDS per process and state held."""
    state, why, _ = _read(r)
    return state, why


def rewound(r: Registration) -> str:
    """Why the receiver's database went back in time (`went_back`), why its health could not be read, or
    why the back-office gives up on it too early (`waits_too_little`); "" when none."""
    state, why, slow = _read(r)
    return why or "; ".join(x for x in (went_back(r.state, state, r.where()), slow) if x)


def call_refused(status: int, answer: Any) -> str:
    """Why the receiver refused a call itself, in its words ("" when it did not, or when a copy of the
    call may have applied: a replay): a refusal in `REFUSED_WHOLE` in the protocol's one JSON line."""
    if status not in REFUSED_WHOLE or not isinstance(answer, dict) or not isinstance(answer.get("error"), str):
        return ""
    if status == 401 and answer.get("kind") == calls.Replayed.kind:
        return ""
    return answer["error"][:300] or f"HTTP {status}"


class HttpTarget:
    """A receiver reached over HTTP, as registered."""

    def __init__(self, registration: Registration, reread: Callable[[], Registration | None] | None = None) -> None:
        self.r = registration
        self.name = registration.name
        self._reread = reread  # the registration read again (a process keeps it a while: `targets.for_target`)

    def _verified(self, token: str) -> dict[str, Any]:
        """`verify_evidence` under the registered keys; evidence that does not verify under the keys this
        process holds is checked once more under the registration read again (a key registered since)."""
        try:
            return verify_evidence(token, self.r.keys)
        except BadEvidence:
            fresh = self._reread() if self._reread is not None else None
            if fresh is None or fresh.keys == self.r.keys:
                raise
            self.r = fresh
            return verify_evidence(token, self.r.keys)

    @property
    def capabilities(self) -> Capabilities:
        """What the receiver declares it enforces (discovery, read at most once a minute per process)."""
        key = _cache_key(self.r)
        seen = _discovered.get(key)
        if seen is not None and time.monotonic() - seen[0] < DISCOVERY_SECONDS:
            return seen[1]
        caps = discover(_client(self.r), self.r.base_url, self.name).capabilities
        _discovered[key] = (time.monotonic(), caps)
        return caps

    def signed(self, name: str, body: dict[str, Any]) -> httpx.Request:
        """A call, signed with the back-office's key (`wire.calls.sign`: RFC 9421 over the method, the
        URL and the body's digest, with a fresh nonce, made now and good for a minute)."""
        content = json.dumps(body, separators=(",", ":")).encode()
        request = _client(self.r).build_request(
            "POST", self.r.base_url + name, content=content, headers={"Content-Type": "application/json"}
        )
        calls.sign(request, content, key=grants.private_key(), key_id=calls.BACKOFFICE_KEY_ID, now=clock.now())
        return request

    def _call(self, name: str, body: dict[str, Any]) -> tuple[int, Any]:
        """POST a signed call: the status and the JSON answer, or httpx's error / ValueError."""
        response = _client(self.r).send(self.signed(name, body))
        return response.status_code, response.json()

    def _answer(self, name: str, body: dict[str, Any]) -> Any:
        """The answer to a call that cannot change anything (a read, a fence): TargetUnreachable for
        anything but a 200, TargetRefused for a 422."""
        try:
            status, answer = self._call(name, body)
        except (httpx.HTTPError, ValueError) as exc:
            raise TargetUnreachable(f"{self.where()} did not answer {name} ({type(exc).__name__}: {exc})") from None
        return self._judged(name, status, answer)

    def _judged(self, name: str, status: int, answer: Any) -> Any:
        if status == 422 and isinstance(answer, dict) and isinstance(answer.get("refused"), dict):
            refused = answer["refused"]
            raise TargetRefused(str(refused.get("kind", "refused")), str(refused.get("message", "")))
        if status != 200 or not isinstance(answer, dict):
            said = answer.get("error") if isinstance(answer, dict) else None
            raise TargetUnreachable(f"{self.where()} did not answer {name} (HTTP {status}: {str(said)[:300]})")
        return answer

    def inventory(self, target: str, communities: int) -> list[dict[str, str]]:
        try:
            return list(self._answer("inventory", {"target": target, "communities": communities})["communities"])
        except TargetRefused as refused:  # nothing to inventory here: the submission is refused, saying why
            raise Refused(f"{self.name} refused the inventory: {refused.message}") from None

    def preview(self, target: str, community_ids: list[str]) -> dict[str, dict[str, Any]]:
        return dict(self._answer("preview", {"target": target, "community_ids": community_ids})["communities"])

    def fence(self, request_id: UUID) -> int:
        return int(self._answer("fence", {"request_id": str(request_id)})["generation"])

    def apply(self, grant: str) -> dict[str, Any]:
        """The evidence the receiver signed, TargetRefused (nothing applied: the effect refused, or the call
        itself, `call_refused`) or TargetBusy (nothing changed, retry). Any other outcome raises what the
        handler reads as "effect unknown": the answer was lost or cannot be believed."""
        status, answer = self._call("apply", {"grant": grant})
        if status == 409 and isinstance(answer, dict) and isinstance(answer.get("retry"), dict):
            retry = answer["retry"]
            raise TargetBusy(str(retry.get("kind", "retry"))[:40], str(retry.get("message", ""))[:500])
        refused = call_refused(status, answer)
        if refused:
            raise TargetRefused(
                CALL_REFUSED,
                f"{self.where()} refused the call itself (HTTP {status}: {refused}), so nothing was applied; "
                "sending it again changes nothing until what it names is mended (the receiver's public URL "
                "registered here, the back-office's key configured there, the clocks)",
            )
        return self._verified(self._judged("apply", status, answer)["evidence"])

    def lookup(self, operation_id: UUID) -> Lookup:
        try:
            answer = self._answer("lookup", {"operation_id": str(operation_id)})
        except TargetUnreachable as exc:
            return Unreadable(exc.message)
        if "found" in answer:
            try:
                return Found(self._verified(answer["found"]))
            except BadEvidence as exc:  # a record is there: the operation may well have been applied
                raise TargetRefused(
                    "tampered",
                    f"{self.where()} has a record of operation {operation_id}, so it may have been applied, but "
                    f"{exc}: nothing was believed",
                ) from None
        if "not_found" in answer:  # believed only signed, and about this operation: it lets the operation be resent
            try:
                said = evidence.verify(answer["not_found"], self.r.keys)
                if said.get("operation_id") != str(operation_id):
                    raise BadEvidence(
                        f"the receiver's 'not found' names operation {str(said.get('operation_id'))[:40]!r}"
                    )
                return NotFound(datetime.fromisoformat(str(said["watermark"])), state_in(said))
            except (BadEvidence, KeyError, ValueError) as exc:
                raise TargetRefused(
                    "tampered",
                    f"{self.where()} answered that operation {operation_id} was not applied, but {exc}: nothing was "
                    "believed, so whether it was applied is unknown",
                ) from None
        return Unreadable(str(answer.get("unreadable", "the receiver gave no answer this protocol knows")))

    def withdraw(self, withdrawal: str) -> int:
        """The epoch the receiver now enforces, once its signed acknowledgement names this withdrawal."""
        said = evidence.verify(self._answer("withdraw", {"withdrawal": withdrawal}).get("acknowledged"), self.r.keys)
        if said.get("withdrawal") != withdrawal or not isinstance(said.get("epoch"), int):
            raise BadEvidence("the receiver's acknowledgement is not of this withdrawal")
        return int(said["epoch"])

    def believed_state(self, evidence: dict[str, Any]) -> tuple[str, str, int] | None:
        """Noted where the evidence is saved (`store.stages.save_result`: the highest kept)."""
        state = state_in(evidence)
        return (self.r.prefix, state.incarnation, state.applied) if state is not None else None

    def where(self) -> str:
        return self.r.where()
