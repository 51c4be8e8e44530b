"""The decision log and alarms."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Q

from core import decisions
from core.authority import Actor
from core.sql import Statements
from retirements.contract import DECISION_NOTICES, FAILING_ALARM
from retirements.models import Alarm, Decision, NoticeSlot, RetirementRequest, Workspace

logger = logging.getLogger("retirements")
SQL = Statements.beside(__file__, "decisions.sql")


def log_decision(
    *,
    request: RetirementRequest | None,
    workspace: Workspace,
    actor: Actor | None,
    action: str,
    reason: str,
    now: datetime,
    system: str = "watcher",
    generation: int | None = None,
) -> Decision:
    """`actor` None: the system component `system` decided; `generation`: the lease it acted under.
    A decision that changes the retirement's course also queues its staff notice (due now)."""
    kind = DECISION_NOTICES.get(action)
    if kind is not None and request is not None:
        NoticeSlot.objects.create(request=request, kind=kind, due_at=now, gating=False)
    return decisions.record(
        Decision,
        actor=actor,
        action=action,
        reason=reason,
        now=now,
        system=system,
        generation=generation,
        request=request,
        workspace=workspace,
    )


def raise_alarm(
    *, kind: str, request: RetirementRequest, message: str, now: datetime, slot: NoticeSlot | None = None
) -> Alarm | None:
    """Save an open alarm (one per kind, request and slot) and log it as an error."""
    logger.error("alarm kind=%s request=%s slot=%s", kind, request.id, slot.id if slot else None)  # ids only
    open_ = Alarm.objects.filter(kind=kind, request=request, slot=slot, resolved_at__isnull=True)
    existing = open_.first()
    if existing:
        return existing
    try:
        with transaction.atomic():
            return Alarm.objects.create(kind=kind, request=request, slot=slot, message=message, created_at=now)
    except IntegrityError:
        return open_.first()


def resolve_failing(request_ids: list[Any], *, now: datetime) -> None:
    """A watcher step that succeeded ends its request's failing alarm (one statement a batch)."""
    Alarm.objects.filter(request_id__in=request_ids, kind=FAILING_ALARM, resolved_at__isnull=True).update(
        resolved_at=now
    )


def resolve_age_alarms(*, watcher_age: str, hold_age: str, now: datetime) -> int:
    """An age alarm ends with what it asked for: its request concluded, or (a long hold) released."""
    concluded = ["executing", "completed", "cancelled", "closed"]
    return (
        Alarm.objects.filter(resolved_at__isnull=True)
        .filter(Q(kind=watcher_age, request__status__in=concluded) | (Q(kind=hold_age) & ~Q(request__status="held")))
        .update(resolved_at=now)
    )


def resolve_alarms(*, kind: str, request: RetirementRequest, now: datetime, slot_ids: Iterable[int] = ()) -> None:
    alarms = Alarm.objects.filter(kind=kind, request=request, resolved_at__isnull=True)
    slot_ids = list(slot_ids)
    if slot_ids:
        alarms = alarms.filter(slot_id__in=slot_ids)
    alarms.update(resolved_at=now)


def close_alarm(
    *, request: RetirementRequest, workspace: Workspace, kind: str, actor: Actor, reason: str, now: datetime
) -> int:
    """A person closes the open alarm of `kind` that no move answers (the request locked), with
    what they found: their decision logged, and the alarm row names it (one statement, the only
    writer of that move). The alarm's id."""
    decision = log_decision(
        request=request, workspace=workspace, actor=actor, action="close_alarm", reason=f"{kind}: {reason}", now=now
    )
    with connection.cursor() as cur:
        closed = SQL.one(cur, "close_alarm", request_id=request.id, kind=kind, decision_id=decision.id, now=now)
    if closed is None:
        raise ValueError(f"request {request.id} has no open {kind} alarm: nothing closed")
    return int(closed[0])
