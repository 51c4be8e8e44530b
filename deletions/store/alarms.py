"""Alarms: the owner of a case that waits on a person is alerted, and the alarm clears when it settles."""

from __future__ import annotations

import logging
from datetime import datetime
from uuid import UUID

from django.db import IntegrityError, transaction

from core.logs import event
from deletions.models import DeletionAlarm

logger = logging.getLogger("deletions")
EFFECT_UNKNOWN = "effect_unknown"
BOUNDARY_REFUSED = "boundary_refused"  # the target system refused an effect: a person looks at why
# The records contradict themselves (an inventory that no longer matches its digest, an approval
# that fails its own check, a foreign record under an operation id, evidence that contradicts its
# stage): a fault of the system, which no approval clears; a person investigates or cancels.
INTEGRITY = "integrity_fault"
AFTER_WITHDRAWAL = "applied_after_withdrawal"  # an effect recorded by hand after the approval was revoked


def raise_alarm(*, request_id: UUID, kind: str, message: str, now: datetime, stage_id: UUID | None = None) -> None:
    """One open alarm per request and kind, and an error log line with ids (the message stays in the row)."""
    event(logger, "alarm", logging.ERROR, request_id=request_id, stage_id=stage_id, reason=kind)
    try:
        with transaction.atomic():
            DeletionAlarm.objects.update_or_create(
                request_id=request_id,
                kind=kind,
                resolved_at=None,
                defaults={"message": message},
                create_defaults={"message": message, "created_at": now},
            )
    except IntegrityError:  # a concurrent writer opened it first
        pass


def resolve(*, request_id: UUID, kind: str, now: datetime) -> int:
    return DeletionAlarm.objects.filter(request_id=request_id, kind=kind, resolved_at__isnull=True).update(
        resolved_at=now
    )
