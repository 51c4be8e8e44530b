"""Notice slots: claimed before the send (each claim the next generation), re-checked just before
it, their outcome recorded by the holder of the current claim only."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from uuid import UUID

from django.db import connection, transaction

from core.authority import Actor
from core.sql import Statements
from retirements.contract import NOTICE_FAILED_ALARM, NoticeClaim, NoticeRetry, PlannedNotice, SlotView
from retirements.models import NoticeSlot, NoticeStatus, RequestStatus, RetirementRequest, Workspace
from retirements.store.decisions import log_decision, raise_alarm, resolve_alarms

logger = logging.getLogger("retirements")
SQL = Statements.beside(__file__, "notices.sql")


def claim_due(
    request_ids: list[UUID], *, claimer: str, until: datetime, now: datetime, slot_id: int | None = None
) -> dict[UUID, list[NoticeClaim]]:
    """Claim the due notices of these requests (or only `slot_id`), in each one's due order, by
    request; a request with nothing due is not in it."""
    claimed: dict[UUID, list[NoticeClaim]] = {}
    with connection.cursor() as cur:
        cur.execute(
            SQL.sql("claim_due"),
            {"request_ids": request_ids, "slot_id": slot_id, "claimer": claimer, "until": until, "now": now},
        )
        for request_id, slot, kind, generation in cur.fetchall():
            claimed.setdefault(request_id, []).append(NoticeClaim(int(slot), str(kind), int(generation)))
    return claimed


def lost_claim(claim: NoticeClaim, *, claimer: str, until: datetime) -> str | None:
    """Just before a send: None while this claimer still holds the claim (which then stands until
    `until` at least); otherwise why not, and the sender stands down."""
    with connection.cursor() as cur:
        if SQL.one(cur, "still_held", id=claim.slot_id, claimer=claimer, generation=claim.generation, until=until):
            return None
    status, generation = NoticeSlot.objects.values_list("status", "claim_generation").get(id=claim.slot_id)
    return f"its claim (generation {claim.generation}) was taken over: now {status}, generation {generation}"


def record_delivered(claims: list[tuple[int, int]], *, claimer: str, now: datetime) -> int:
    """Delivered, for the claims (slot, generation) this claimer still holds; one taken over since
    (its own having run out) is left to its new holder, and the refused save is logged."""
    with connection.cursor() as cur:
        recorded = SQL.one(
            cur,
            "record_delivered",
            ids=[slot for slot, _ in claims],
            generations=[generation for _, generation in claims],
            claimer=claimer,
            now=now,
        )
    if recorded is None or recorded[0] != len(claims):
        logger.warning(
            "notice outcome for a lost claim refused: %s of %s recorded", recorded and recorded[0], len(claims)
        )
    return int(recorded[0]) if recorded else 0


def pending_slots(request_ids: list[UUID]) -> dict[UUID, list[SlotView]]:
    """The notices not yet settled of each request (every request asked for is in it)."""
    pending: dict[UUID, list[SlotView]] = {request_id: [] for request_id in request_ids}
    with connection.cursor() as cur:
        cur.execute(SQL.sql("pending_slots"), {"request_ids": request_ids})
        for request_id, *slot in cur.fetchall():
            pending.setdefault(request_id, []).append(SlotView(*slot))
    return pending


def record_notice_failure(
    slot_id: int, error: str, *, claimer: str, generation: int, now: datetime, retry: Callable[[int], NoticeRetry]
) -> None:
    """The send failed: retry later or fail for good, as `retry` decides from the attempts made,
    for the claim this claimer still holds (a stale holder's save is refused and changes nothing)."""
    with transaction.atomic():
        slot = NoticeSlot.objects.select_for_update().select_related("request").get(id=slot_id)
        decided = retry(slot.attempts)
        with connection.cursor() as cur:
            saved = SQL.one(
                cur,
                "record_failed",
                id=slot_id,
                claimer=claimer,
                generation=generation,
                give_up=decided.exhausted,
                error=error,
                next_attempt_at=decided.next_attempt_at,
            )
        if saved is None:  # another sender took over: its claim is the current one
            logger.warning(
                "notice outcome for a lost claim refused slot=%s generation=%s (now %s)",
                slot.id, generation, slot.claim_generation,
            )  # fmt: skip
            return
        logger.warning("notice failed slot=%s kind=%s attempt=%s", slot.id, slot.kind, slot.attempts)
        if decided.exhausted:
            raise_alarm(
                kind=NOTICE_FAILED_ALARM,
                request=slot.request,
                slot=slot,
                message=f"{slot.kind} notice failed {slot.attempts} times: {error}",
                now=now,
            )


def replan(
    moves: list[tuple[int, datetime | None, str]], *, sources: Sequence[str] = (NoticeStatus.PENDING,)
) -> set[int]:
    """Move notice slots (slot, new due time or None to suppress it, why), each with its reason in
    the same update: the one writer of a slot's re-plan or suppression. Only slots still in one
    of `sources`; returns those moved."""
    if not moves:
        return set()
    with connection.cursor() as cur:
        cur.execute(
            SQL.sql("replan"),
            {
                "ids": [slot for slot, _, _ in moves],
                "due_ats": [due for _, due, _ in moves],
                "whys": [why for _, _, why in moves],
                "sources": [str(s) for s in sources],
            },
        )
        return {row[0] for row in cur.fetchall()}


def suppress_pending(request_id: UUID, *, why: str) -> set[int]:
    """The pending notices of a request that ended are suppressed, with why (`replan`)."""
    ids = NoticeSlot.objects.filter(request_id=request_id, status=NoticeStatus.PENDING).values_list("id", flat=True)
    return replan([(slot, None, why) for slot in ids])


def rearm_failed_notices(
    request: RetirementRequest, workspace: Workspace, *, actor: Actor, reason: str, now: datetime
) -> list[str]:
    """A staff decision: failed notices get a fresh attempt budget, due now."""
    slots = list(NoticeSlot.objects.select_for_update().filter(request=request, status=NoticeStatus.FAILED))
    for slot in slots:
        slot.rearm()
        slot.attempts, slot.next_attempt_at = 0, None
        slot.save(update_fields=["status", "attempts", "next_attempt_at"])
    resolve_alarms(kind=NOTICE_FAILED_ALARM, request=request, now=now, slot_ids=[s.id for s in slots])
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
    """New slots, as planned (one a re-plan adds says why: `moved_because`)."""
    NoticeSlot.objects.bulk_create(
        NoticeSlot(request=request, kind=p.kind, due_at=p.due_at, gating=p.gating, moved_because=p.why) for p in plan
    )
