"""The evidence a deletion case believes: each stage's saved result checked against its receipt
(`receipts.believe`) on every read that matters, and a mismatch raised as the case's integrity alarm.

`of_case` is a case's own reads (the proof, the case page, `show_deletion`, the API's case read):
every stage of the one case, CPU per stage and a constant number of queries. `sweep` is health's:
a bounded batch per call (the newest cases' stages, then the next window of a rolling cursor through
all the others), so `/healthz` costs the same at any size. Either raises the alarm once per case
(`store.alarms.raise_once`: one open integrity alarm a case), naming the stage and the fields, never
their values (the alarm is shown to readers who may not see evidence).
"""

from __future__ import annotations

import random
import threading
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from uuid import UUID

from deletions import receipts, selectors, targets
from deletions.contract import StageSnapshot
from deletions.models import DeletionAlarm
from deletions.receipts import Belief
from deletions.store import alarms

# Health's batch (`sweep`): the newest cases' stages, and a window of the rest in key order. A receipt
# costs 0.2 to 0.4 ms of CPU to check (its Ed25519 signature), and one already checked unchanged costs
# nothing (`receipts.believe` remembers it): a call checks the window's 10 afresh, 3 to 5 ms with
# its one query (ARCHITECTURE.md).
NEWEST = 10
WINDOW = 10
NAMED = 5  # cases a health detail names; the rest counted


@dataclass(frozen=True)
class Fault:
    """One stage whose saved evidence is not what its receipt says."""

    request_id: UUID
    stage_id: UUID
    stage: str
    community_id: str | None
    operation_id: UUID
    belief: Belief

    def words(self, *, values: bool) -> str:
        return receipts.fault_words(self.stage, self.community_id, self.operation_id, self.belief, values=values)


@dataclass(frozen=True)
class CaseEvidence:
    """What each stage of one case is believed to have done (by stage id), and the stages whose saved
    evidence does not match its receipt."""

    beliefs: dict[UUID, Belief]
    faults: list[Fault] = field(default_factory=list)
    keys: dict[str, str] | None = None  # the receiver's keys the stages were checked under (None: manual)

    def said(self, *, values: bool) -> str:
        """Every fault in one line."""
        return "; ".join(f.words(values=values) for f in self.faults)

    def shown(self, stages: list[StageSnapshot]) -> list[StageSnapshot]:
        """The stages as a reader is shown them: each result what its receipt says (nothing, when the
        receipt does not verify), never the saved copy; an operator's record as recorded."""
        return [
            replace(s, metadata={**s.metadata, "result": self.beliefs[s.id].evidence})
            if s.id in self.beliefs and self.beliefs[s.id].how in (receipts.SIGNED, receipts.MISMATCH)
            else s
            for s in stages
        ]

    def cited(self) -> dict[str, str]:
        """The receiver's public key of each key id the believed receipts name (what a proof carries)."""
        kids = {b.key_id for b in self.beliefs.values() if b.how == receipts.SIGNED}
        return {k: (self.keys or {})[k] for k in sorted(kids) if k in (self.keys or {})}


def alarm_message(faults: list[Fault]) -> str:
    return f"{receipts.FAULT}: " + "; ".join(f.words(values=False) for f in faults)


def believed(target: str, stages: list[StageSnapshot], request_id: UUID) -> CaseEvidence:
    """Each stage of one case believed (no write): the receiver's keys read once, each receipt checked."""
    keys = targets.keys_for(target)
    beliefs: dict[UUID, Belief] = {}
    faults = []
    for s in stages:
        belief = receipts.believe(s.metadata.get("result"), keys)
        beliefs[s.id] = belief
        if belief.fault:
            faults.append(Fault(request_id, s.id, s.stage, s.community_id, s.operation_id, belief))
    return CaseEvidence(beliefs, faults, keys)


def of_case(req: Any, stages: list[StageSnapshot], now: datetime) -> CaseEvidence:
    """`believed`, and a mismatch raised as the case's integrity alarm (once: while one is open, nothing)."""
    checked = believed(req.target, stages, req.id)
    if checked.faults:
        alarms.raise_once(request_id=req.id, kind=alarms.INTEGRITY, message=alarm_message(checked.faults), now=now)
    return checked


@dataclass(frozen=True)
class Swept:
    """One health call's evidence check: how many receipts it checked, the stages it found wrong."""

    checked: int
    faults: list[Fault]
    wrapped: bool  # the cursor came to the end and starts again from the lowest key


# The rolling cursor, per process: it starts at a random key, so processes answering health sweep
# different parts; a process that lives (the web server's workers) goes through every stage in turn.
_cursor = {"after": uuid.UUID(int=random.getrandbits(128))}
_lock = threading.Lock()
LOWEST = uuid.UUID(int=0)


def sweep(now: datetime, *, newest: int = NEWEST, window: int = WINDOW) -> Swept:
    """Check a bounded batch of saved results against their receipts: the newest cases' stages (at most
    `newest`) and the next `window` after the cursor; raise the alarm of each case found wrong."""
    with _lock:
        after = _cursor["after"]
    first, rest = selectors.results_to_check(newest=newest, after=after, window=window)
    wrapped = len(rest) < window
    with _lock:
        _cursor["after"] = LOWEST if wrapped else rest[-1].stage_id if rest else after
    systems = targets.registered() if first or rest else []
    seen: set[UUID] = set()
    faults: list[Fault] = []
    for saved in [*first, *rest]:
        if saved.stage_id in seen:
            continue
        seen.add(saved.stage_id)
        belief = receipts.believe(saved.result, targets.keys_in(saved.target, systems))
        if belief.fault:
            faults.append(
                Fault(saved.request_id, saved.stage_id, saved.stage, saved.community_id, saved.operation_id, belief)
            )
    by_case: dict[UUID, list[Fault]] = {}
    for f in faults:
        by_case.setdefault(f.request_id, []).append(f)
    for request_id, found in by_case.items():
        alarms.raise_once(request_id=request_id, kind=alarms.INTEGRITY, message=alarm_message(found), now=now)
    return Swept(len(seen), faults, wrapped)


def open_alarms(limit: int) -> tuple[int, list[tuple[UUID, str]]]:
    """Open integrity alarms raised for evidence that does not match its receipt: how many (counted up
    to 1,000) and the first `limit` (case, message), the oldest first. Read through the open alarms'
    index; one query while there are at most `limit`."""
    rows = DeletionAlarm.objects.filter(
        kind=alarms.INTEGRITY, resolved_at__isnull=True, message__startswith=receipts.FAULT
    ).order_by("created_at", "id")
    first = list(rows.values_list("request_id", "message")[: limit + 1])
    count = len(first) if len(first) <= limit else rows[:1000].count()
    return count, first[:limit]
