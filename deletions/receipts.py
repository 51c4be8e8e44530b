"""What a stage is believed to have done: what its receiver's verified receipt says, never the copy
saved beside it.

A receiver signs the evidence of each effect (`wire.evidence`: a compact JWS, alg Ed25519, `kid` its
key id); the back-office saves the fields it signed as the stage's result with the JWS beside them
(`receipt`).
A saved field can be edited behind the back-office (a superuser, a restore); the receipt cannot be
re-signed without the receiver's key. So every read that matters (the proof and its `--verify`, the
case page, `show_deletion`, the API, health's evidence check) asks `believe`: the receipt verified
against the receiver's keys (by key id: an old key stays registered after a rotation) and its
payload compared with the saved fields. A stage of a manual (supervised) target has no receipt: its
evidence is the operator's record, believed as recorded.

Pure: no ORM, no I/O. A receipt costs about 0.2 ms of CPU to check, so a case checks its own stages
on its own reads, never a list's.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from wire import evidence
from wire.evidence import BadEvidence

RECEIPT = "receipt"  # the saved result's field that holds the receiver's JWS

# How a stage's evidence is believed.
SIGNED = "receipt"  # what its receipt says, verified, and the saved fields agree
BY_HAND = "operator's record"  # a manual (supervised) target: the operator's record is all there is
NONE = "none"  # no result saved (not completed yet, or retention dropped it)
MISMATCH = "mismatch"  # the saved fields are not what the receipt says, or the receipt does not verify

# What an integrity alarm of this kind starts with (health finds the open ones by it).
FAULT = "the saved evidence does not match its receipt"
SHOWN_VALUE = 60  # characters of a differing value a refusal quotes


class _Absent:
    def __repr__(self) -> str:
        return "absent"


ABSENT: Any = _Absent()


@dataclass(frozen=True)
class Differs:
    """One field the saved evidence and its receipt do not agree on (ABSENT: not there)."""

    field: str
    saved: Any
    signed: Any


@dataclass(frozen=True)
class Belief:
    """What one stage is believed to have done (`how`), the evidence believed (the receipt's payload
    with the receipt; the operator's record; nothing), and for a mismatch why and which fields."""

    how: str
    evidence: dict[str, Any]
    key_id: str = ""
    differs: tuple[Differs, ...] = ()
    why: str = ""

    @property
    def fault(self) -> bool:
        return self.how == MISMATCH

    def said(self, *, values: bool) -> str:
        """The mismatch in words: which fields differ (with the saved and the signed value, for a
        reader who may see evidence), or why the receipt does not hold."""
        if not self.differs:
            return self.why
        fields = ", ".join(d.field for d in self.differs)
        if not values:
            return f"{fields} differ{'s' if len(self.differs) == 1 else ''} from what the receiver signed"
        return "; ".join(f"{d.field} saved {_shown(d.saved)}, signed {_shown(d.signed)}" for d in self.differs)


def _shown(value: Any) -> str:
    text = "absent" if value is ABSENT else json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return text if len(text) <= SHOWN_VALUE else text[:SHOWN_VALUE] + "…"


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON says it (so true is not 1)."""
    if a is ABSENT or b is ABSENT:
        return a is b
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def believe(result: Any, keys: dict[str, str] | None) -> Belief:
    """What a stage's saved result (`metadata_json -> 'result'`) is believed to say. `keys`: the
    receiver's public keys by key id; None for a manual (supervised) target, whose stages have no
    receipt and whose evidence is the operator's record.

    A result found to be exactly what its receipt says is remembered per process (the digest of the
    result and the keys, `_MATCHED`): a live case page, read every few seconds, and health's newest
    stages check each receipt's signature once, not at every read; any changed byte of the result, or
    of the keys, is checked afresh, and a mismatch always is."""
    if result is None or keys is None or not isinstance(result, dict):
        return _believe(result, keys)
    try:
        seen = hashlib.sha256(json.dumps([result, keys], sort_keys=True, separators=(",", ":")).encode()).digest()
    except (TypeError, ValueError):
        return _believe(result, keys)
    with _lock:
        kid = _MATCHED.get(seen)
        if kid is not None:
            _MATCHED.move_to_end(seen)
    if kid is not None:  # the saved fields are the signed ones, field for field: the result is what it says
        return Belief(SIGNED, dict(result), kid)
    belief = _believe(result, keys)
    if belief.how == SIGNED:
        with _lock:
            _MATCHED[seen] = belief.key_id
            if len(_MATCHED) > REMEMBERED:
                _MATCHED.popitem(last=False)
    return belief


REMEMBERED = 65_536  # results found to match their receipts, remembered per process (a digest each)
_MATCHED: OrderedDict[bytes, str] = OrderedDict()
_lock = threading.Lock()


def _believe(result: Any, keys: dict[str, str] | None) -> Belief:
    if result is None:
        return Belief(NONE, {})
    if keys is None:
        return Belief(BY_HAND, dict(result) if isinstance(result, dict) else {"record": result})
    if not isinstance(result, dict):
        return Belief(MISMATCH, {}, why="the saved result is not a record, and no receipt says it")
    token = result.get(RECEIPT)
    if token is None:
        return Belief(MISMATCH, {}, why="it has no receipt: nothing the receiver signed says it")
    kid = evidence.key_id(token)
    try:
        payload = evidence.verify(token, keys)
    except BadEvidence as exc:
        return Belief(MISMATCH, {}, kid, why=f"its receipt does not verify: {exc}")
    saved = {k: v for k, v in result.items() if k != RECEIPT}
    differs = tuple(
        Differs(k, saved.get(k, ABSENT), payload.get(k, ABSENT))
        for k in sorted(saved.keys() | payload.keys())
        if not _same(saved.get(k, ABSENT), payload.get(k, ABSENT))
    )
    believed = {**payload, RECEIPT: token}
    if differs:
        return Belief(MISMATCH, believed, kid, differs)
    return Belief(SIGNED, believed, kid)


def where(stage: str, community_id: str | None, operation_id: Any) -> str:
    """A stage as a fault names it: "purge_db in community …000b (operation 5c0a9e31-…)"."""
    place = f" in community {community_id}" if community_id else ""
    return f"{stage}{place} (operation {operation_id})"


def fault_words(stage: str, community_id: str | None, operation_id: Any, belief: Belief, *, values: bool) -> str:
    """One stage's mismatch, as the case page, `show_deletion`, the refusal of a proof and the alarm say it."""
    return f"{where(stage, community_id, operation_id)}: {belief.said(values=values)}"
