"""Alarms: the owner of a case that waits on a person is alerted, and the alarm clears when it settles;
a fault closes only by a person's decision with a reason."""

from __future__ import annotations

import logging
from datetime import datetime
from uuid import UUID

from django.db import IntegrityError, connection, transaction

from core.logs import event
from core.sql import Statements
from deletions import contract
from deletions.models import DeletionAlarm

logger = logging.getLogger("deletions")
SQL = Statements.beside(__file__, "alarms.sql")
EFFECT_UNKNOWN = "effect_unknown"
BOUNDARY_REFUSED = "boundary_refused"  # the target system refused an effect: a person looks at why
# The records contradict themselves (an inventory that no longer matches its digest, an approval
# that fails its own check, a foreign record under an operation id, evidence that contradicts its
# stage): a fault of the system, which no approval clears; a person investigates or cancels.
INTEGRITY = contract.INTEGRITY
AFTER_WITHDRAWAL = contract.AFTER_WITHDRAWAL  # an effect recorded by hand after the approval was revoked


def raise_alarm(*, request_id: UUID, kind: str, message: str, now: datetime, stage_id: UUID | None = None) -> None:
    """One open alarm per request and kind, and an error log line with ids (the message stays in the row).
    An open alarm keeps the words it was raised with: an alarm is a record, never rewritten (the
    case's open question says what is happening now)."""
    event(logger, "alarm", logging.ERROR, request_id=request_id, stage_id=stage_id, reason=kind)
    try:
        with transaction.atomic():
            DeletionAlarm.objects.get_or_create(
                request_id=request_id,
                kind=kind,
                resolved_at=None,
                defaults={"message": message, "created_at": now},
            )
    except IntegrityError:  # a concurrent writer opened it first
        pass


def raise_once(*, request_id: UUID, kind: str, message: str, now: datetime) -> bool:
    """Open this alarm unless the case has one of this kind open already (one statement: a fault
    that every read finds again is raised once, never rewritten); whether it was opened now."""
    with connection.cursor() as cur:
        opened = SQL.one(cur, "raise_once", request_id=request_id, kind=kind, message=message, now=now) is not None
    if opened:
        event(logger, "alarm", logging.ERROR, request_id=request_id, reason=kind)
    return opened


def resolve(*, request_id: UUID, kind: str, now: datetime) -> int:
    """An alarm that clears when what it waits for settles; never a fault (`close_fault`)."""
    if kind in contract.FAULT_ALARMS:
        raise ValueError(f"a {kind} alarm closes only by a person's decision (close_fault)")
    return DeletionAlarm.objects.filter(request_id=request_id, kind=kind, resolved_at__isnull=True).update(
        resolved_at=now
    )


def close_fault(*, request_id: UUID, kind: str, decision_id: int, now: datetime) -> bool:
    """Close the open fault of `kind` with the person's decision that closes it (the request is
    locked): the only writer of that move. False when none was open."""
    with connection.cursor() as cur:
        closed = SQL.one(cur, "close_fault", request_id=request_id, kind=kind, decision_id=decision_id, now=now)
    return closed is not None
