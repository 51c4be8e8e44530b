"""Notice slots: claimed before the send, their outcome recorded by the claimer only."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from uuid import UUID

from django.db import connection, transaction

from core.authority import Actor
from core.sql import Statements
from retirements.contract import NoticeRetry, PlannedNotice, SlotView
from retirements.models import NoticeSlot, NoticeStatus, RequestStatus, RetirementRequest, Workspace
from retirements.store.decisions import log_decision, raise_alarm, resolve_alarms

logger = logging.getLogger("retirements")
SQL = Statements.beside(__file__, "notices.sql")


def claim_due(
    request_ids: list[UUID], *, claimer: str, until: datetime, now: datetime, slot_id: int | None = None
) -> dict[UUID, list[tuple[int, str]]]:
    """Claim the due notices of these requests (or only `slot_id`), in each one's due order:
    (id, kind) of each, by request; a request with nothing due is not in it."""
    claimed: dict[UUID, list[tuple[int, str]]] = {}
    with connection.cursor() as cur:
        cur.execute(
            SQL.sql("claim_due"),
            {"request_ids": request_ids, "slot_id": slot_id, "claimer": claimer, "until": until, "now": now},
        )
        for request_id, slot, kind in cur.fetchall():
            claimed.setdefault(request_id, []).append((int(slot), str(kind)))
    return claimed


def record_delivered(ids: list[int], *, claimer: str, now: datetime) -> None:
    """Delivered, for the claims this claimer still holds (a claim another sender took over, its
    own having run out, is left to that sender)."""
    with connection.cursor() as cur:
        recorded = SQL.one(cur, "record_delivered", ids=ids, claimer=claimer, now=now)
    if recorded is None or recorded[0] != len(ids):
        logger.warning("notice outcome for a lost claim: %s of %s recorded", recorded and recorded[0], len(ids))


def pending_slots(request_ids: list[UUID]) -> dict[UUID, list[SlotView]]:
    """The notices not yet settled of each request (every request asked for is in it)."""
    pending: dict[UUID, list[SlotView]] = {request_id: [] for request_id in request_ids}
    with connection.cursor() as cur:
        cur.execute(SQL.sql("pending_slots"), {"request_ids": request_ids})
        for request_id, *slot in cur.fetchall():
            pending.setdefault(request_id, []).append(SlotView(*slot))
    return pending


def record_notice_failure(
    slot_id: int, error: str, *, claimer: str, now: datetime, retry: Callable[[int], NoticeRetry]
) -> None:
    """The send failed: retry later or fail for good, as `retry` decides from the attempts made."""
    with transaction.atomic():
        slot = NoticeSlot.objects.select_for_update().select_related("request").get(id=slot_id)
        if slot.status != NoticeStatus.SENDING or slot.claimed_by != claimer:
            logger.warning("notice outcome for a lost claim slot=%s", slot.id)  # another sender took over
            return
        decided = retry(slot.attempts)
        if decided.exhausted:
            slot.give_up()
        else:
            slot.retry_later()
        slot.last_error = error
        slot.next_attempt_at = decided.next_attempt_at
        slot.claimed_by, slot.claim_expires_at = "", None
        slot.save(update_fields=["status", "last_error", "next_attempt_at", "claimed_by", "claim_expires_at"])
        logger.warning("notice failed slot=%s kind=%s attempt=%s", slot.id, slot.kind, slot.attempts)
        if decided.exhausted:
            raise_alarm(
                kind="notice_failed",
                request=slot.request,
                slot=slot,
                message=f"{slot.kind} notice failed {slot.attempts} times: {error}",
                now=now,
            )


def suppress_slot(slot: NoticeSlot) -> None:
    slot.suppress()
    slot.next_attempt_at = None
    slot.save(update_fields=["status", "next_attempt_at"])


def rearm_failed_notices(
    request: RetirementRequest, workspace: Workspace, *, actor: Actor, reason: str, now: datetime
) -> list[str]:
    """A staff decision: failed notices get a fresh attempt budget, due now."""
    slots = list(NoticeSlot.objects.select_for_update().filter(request=request, status=NoticeStatus.FAILED))
    for slot in slots:
        slot.rearm()
        slot.attempts, slot.next_attempt_at = 0, None
        slot.save(update_fields=["status", "attempts", "next_attempt_at"])
    resolve_alarms(kind="notice_failed", request=request, now=now, slot_ids=[s.id for s in slots])
    kinds = [s.kind for s in slots]
    if request.status == RequestStatus.WAITING:
        request.next_wake_at = now
    request.last_action = f"notices re-armed by {actor.name}: {', '.join(kinds)}"
    request.updated_at = now
    request.save(update_fields=["next_wake_at", "last_action", "updated_at"])
    log_decision(
        request=request,
        workspace=workspace,
        actor=actor,
        action="retry_notices",
        reason=f"{', '.join(kinds)}: {reason}",
        now=now,
    )
    return kinds


def add_slots(request: RetirementRequest, plan: Iterable[PlannedNotice]) -> None:
    NoticeSlot.objects.bulk_create(
        NoticeSlot(request=request, kind=p.kind, due_at=p.due_at, gating=p.gating) for p in plan
    )
