"""The demo target system: the receiving side of every deletion effect.

It applies an effect and checks the fencing token (lease generation) and the
operation id in one indivisible step: a stale owner is rejected, a repeated
operation returns its first outcome. Nothing real is deleted.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection, transaction
from django.utils.dateparse import parse_datetime

from core.sql import Statements
from deletions.errors import Refused, StaleLease

SQL = Statements.beside(__file__, "target_system.sql")


class FencedOut(StaleLease):
    pass


class SourceUnavailable(Refused):
    """The target system's records cannot be read now: nothing can be concluded from that."""


def apply(
    *,
    operation_id: UUID,
    request_id: UUID,
    generation: int,
    executor: str,
    action: str,
    community_id: str | None,
    outcome: dict[str, Any],
    now: datetime,
) -> dict[str, Any]:
    """Apply once per operation id, only for the highest generation seen. Inside the caller's
    transaction when there is one (no savepoint: a refusal rolls the whole effect back)."""
    with transaction.atomic(savepoint=False), connection.cursor() as cur:
        highest = SQL.one(cur, "raise_fence", request_id=request_id, generation=generation)[0]  # type: ignore[index]
        if highest > generation:
            raise FencedOut(
                f"target system rejected {executor} generation {generation}: generation {highest} owns request "
                f"{request_id}"
            )
        inserted = SQL.one(
            cur,
            "apply_effect",
            operation_id=operation_id,
            request_id=request_id,
            action=action,
            community_id=community_id,
            generation=generation,
            executor=executor,
            outcome=json.dumps(outcome),
            now=now,
        )
        if inserted is not None:
            return _as_dict(inserted[0])
        return _as_dict(SQL.one(cur, "recorded", operation_id=operation_id)[0])  # type: ignore[index]


def lookup(operation_id: UUID, *, now: datetime) -> dict[str, Any] | None:
    """What the target system recorded for an operation, or None when not found.

    Two demo switches (off by default) make it behave like a real remote system:
    `DEMO_TARGET_UNREADABLE_UNTIL` (an ISO time) makes every lookup raise until then,
    and `DEMO_TARGET_LOOKUP_LAG_SECONDS` makes an applied effect answer "not found" for
    that long. Callers treat both as "unknown", never as "no effect".
    """
    until = parse_datetime(settings.DEMO_TARGET_UNREADABLE_UNTIL or "")
    if until is not None and now < until:
        raise SourceUnavailable(f"the target system cannot be read until {until.isoformat()}")
    with connection.cursor() as cur:
        cur.execute("SELECT outcome, applied_at FROM demo_target_effects WHERE operation_id = %s", [operation_id])
        row = cur.fetchone()
    if row is None or (now - row[1]).total_seconds() < settings.DEMO_TARGET_LOOKUP_LAG_SECONDS:
        return None
    return _as_dict(row[0])


def _as_dict(value: Any) -> dict[str, Any]:
    return json.loads(value) if isinstance(value, str) else dict(value)


DEMO_COMMUNITY_NAMES = {
    "00000000-0000-0000-0000-00000000000b": "Community B (demo)",
    "00000000-0000-0000-0000-00000000000c": "Community C (demo)",
}


def preview(target: str, community_id: str) -> dict[str, Any]:
    """What the stages would remove for `target` in one community: its name, the
    person's rows and whether agents exist. Read-only; the demo system answers the
    same for the same input (a real target system would count its records)."""
    digest = hashlib.sha256(f"{target}|{community_id}".encode()).digest()
    return {
        "name": DEMO_COMMUNITY_NAMES.get(community_id, f"Community …{community_id[-4:]} (demo)"),
        "rows": 3 + digest[0] % 40,
        "agents": digest[1] % 3,
    }
