"""The watcher's steps (hops 3, 4, 6, 7), run as django-q2 tasks at durable wake times.

No process sleeps through a wait: each step saves `next_wake_at` and returns;
the periodic `run_due` schedule runs whatever is due. The watcher reads what is
due, re-checks it under the workspace and request locks, asks the pure policy,
and tells the store to apply the verdict.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.core.mail import get_connection
from django.db import transaction

from core import authority, clock, present
from core.crashpoints import crash_point
from retirements import jobs, notices, policy, selectors
from retirements.contract import FAILING_ALARM, STALLED_ALARM, NoticeClaim
from retirements.models import (
    RetirementRequest,
    RetirementWatcher,
)
from retirements.purge import run_purge
from retirements.store import ACTIVE_WATCHER, locks, steps
from retirements.store import decisions as store_decisions
from retirements.store import notices as store_notices

logger = logging.getLogger("retirements")
STEP_BATCH = 200  # due steps read per query and stepped together (`step_batch`)
STALL_ALARMS_PER_TICK = 500  # newly stalled watchers alarmed per tick; the rest on the next one


def step(watcher_id: UUID, *, now: datetime, request_id: UUID | None = None) -> str:
    """Wake one watcher (a task, a command, a retry of a busy case): `step_batch` with a batch of one,
    waiting for the locks."""
    if request_id is None:
        request_id = RetirementWatcher.objects.filter(id=watcher_id).values_list("request_id", flat=True).first()
        if request_id is None:
            return f"no watcher {watcher_id}"
    return step_batch([(request_id, watcher_id)], now=now, skip_locked=False)[request_id]


def step_batch(batch: list[tuple[UUID, UUID]], *, now: datetime, skip_locked: bool) -> dict[UUID, str]:
    """Wake a batch of watchers ((request, watcher) pairs): beat, send what is due, recheck at the
    boundary, in at most two transactions for the whole batch, each statement once for all of
    them. The first locks the batch, beats and, for a case with nothing to send, decides the
    boundary too; with notices due it claims them (a claim is saved before its send), they are
    sent with no transaction open, each once its claim is re-checked (a case whose every claim
    was taken over meanwhile is left to its new holder: "stood down"), and the second saves their
    outcomes and decides the boundary, where those outcomes count. `skip_locked`: a case another
    tick holds now is left to it ("busy").

    One verdict decides (`policy.point_of_no_return`); its first rules, read from the request
    alone (`policy.first_verdict`), settle the common step (waiting, not yet eligible) without
    reading the workspace, the requester or the notices' gating. A case they do not settle is
    decided on its own, in a savepoint, so one failing case leaves the batch's others standing."""
    said: dict[UUID, str] = {}
    claimer = uuid.uuid4().hex
    until = now + timedelta(seconds=settings.RETIREMENT_NOTICE_CLAIM_SECONDS)
    with transaction.atomic():
        woken, busy = locks.lock_waiting([r for r, _ in batch], skip_locked=skip_locked)
        stepping: list[tuple[locks.Woken, UUID, policy.Verdict | None]] = []
        for request_id, watcher_id in batch:
            if request_id in busy:
                said[request_id] = "busy: another tick holds this case"
            elif request_id not in woken:
                said[request_id] = f"no retirement request {request_id}"
            else:
                first = _first(woken[request_id], watcher_id, now)
                if first is not None and first.action != policy.WAIT:  # superseded, on hold, or no longer waiting
                    said[request_id] = _alone(request_id, watcher_id, now=now, beat=True)
                else:
                    stepping.append((woken[request_id], watcher_id, first))
        beaten = steps.beat([(w, one.request_id) for one, w, _ in stepping], now=now) if stepping else set()
        for one, watcher_id, _ in stepping:
            if watcher_id not in beaten:
                status = RetirementWatcher.objects.values_list("status", flat=True).get(id=watcher_id)
                said[one.request_id] = f"watcher {status}"
        stepping = [item for item in stepping if item[1] in beaten]
        crash_point("watcher-woke")  # killed here, the whole batch rolls back: the wake-ups stay due
        ids = [one.request_id for one, _, _ in stepping]
        claimed = store_notices.claim_due(ids, claimer=claimer, until=until, now=now) if ids else {}
        quiet = [item for item in stepping if item[0].request_id not in claimed]
        if quiet:
            said.update(_conclude(quiet, now=now))
    if claimed:
        crash_point("notice-claimed")  # claimed and committed, nothing sent: a pause here can outlive the claims
    post = get_connection() if claimed else None  # one mail backend for the batch's sends, not one per notice
    sent = {
        one.request_id: _send_case(one, claimed[one.request_id], claimer, now=now, connection=post)
        for one, _, _ in stepping
        if one.request_id in claimed
    }
    # A case whose every claim was taken over is its new holder's: this step stands down from it.
    for request_id, outcomes in list(sent.items()):
        if all(s.stood_down for s in outcomes):
            said[request_id] = "stood down: " + "; ".join(f"{s.kind} not sent, {s.stood_down}" for s in outcomes)
            del sent[request_id]
    if sent:
        said.update(_boundaries({one.request_id: w for one, w, _ in stepping}, sent, now=now))
    return said


def _send_case(
    one: locks.Woken, claims: list[NoticeClaim], claimer: str, *, now: datetime, connection: Any
) -> list[notices.Sent]:
    """A case's claimed notices, in due order, but a final warning that goes out late first: its
    send moves eligibility (`_warned` saves the move with the outcomes), so every other notice
    sent with it names the eligibility in force once it went out, never the one the move replaces."""
    late = _eligible_after_warning(one, now) != one.eligible_at
    sent = []
    for claim in sorted(claims, key=lambda c: not (late and c.kind == policy.FINAL_WARNING)):
        outcome = notices.send(one, claim, claimer, now=now, connection=connection)
        if outcome.delivered and outcome.kind == policy.FINAL_WARNING:
            one = replace(one, eligible_at=_eligible_after_warning(one, now))
        sent.append(outcome)
    return sent


def _eligible_after_warning(woken: locks.Woken, now: datetime) -> datetime:
    return policy.eligible_after_warning(eligible_at=woken.eligible_at, warned_at=now, requested_at=woken.requested_at)


def _first(woken: locks.Woken, watcher_id: UUID, now: datetime) -> policy.Verdict | None:
    return policy.first_verdict(
        request_status=woken.status,
        watcher_is_authoritative=woken.watcher_id == watcher_id,
        now=now,
        eligible_at=woken.eligible_at,
    )


def _conclude(stepping: list[tuple[locks.Woken, UUID, policy.Verdict | None]], *, now: datetime) -> dict[UUID, str]:
    """The boundary, under the locks the batch holds: not yet eligible waits for the next thing to
    do (its notices still to settle, read in one statement; the waits saved in one); anything
    else takes the whole verdict, case by case."""
    said: dict[UUID, str] = {}
    waiting = [(one, first) for one, _, first in stepping if first is not None and first.action == policy.WAIT]
    pending = store_notices.pending_slots([one.request_id for one, _ in waiting]) if waiting else {}
    waits = []
    for one, first in waiting:
        wake = policy.next_wake(eligible_at=one.eligible_at, pending=pending[one.request_id], blocked_until=None)
        waits.append((one.request_id, wake, first))
        said[one.request_id] = f"{policy.WAIT} until {present.absolute(wake)}"
    steps.wait(waits, now=now)
    for one, watcher_id, verdict in stepping:
        if verdict is None or verdict.action != policy.WAIT:
            said[one.request_id] = _alone(one.request_id, watcher_id, now=now)
    return said


def boundary(watcher_id: UUID, *, now: datetime) -> str:
    """Hop 4 (wait) or hop 6 (point of no return), then hop 7 (conclude) when done, for one watcher."""
    request_id = RetirementWatcher.objects.values_list("request_id", flat=True).get(id=watcher_id)
    return _boundaries({request_id: watcher_id}, {}, now=now)[request_id]


def _boundaries(watchers: dict[UUID, UUID], sent: dict[UUID, list[notices.Sent]], *, now: datetime) -> dict[UUID, str]:
    """The boundary of the cases in `sent` (or of the one in `watchers` when nothing was sent),
    first saving the outcome of the notices just sent, under the same locks (waited for)."""
    ids = list(sent) or list(watchers)
    said: dict[UUID, str] = {}
    with transaction.atomic():
        woken, _ = locks.lock_waiting(ids, skip_locked=False)
        said.update({r: f"no retirement request {r}" for r in ids if r not in woken})
        notices.record([s for r in ids for s in sent.get(r, [])], now=now)
        stepping = []
        for request_id in ids:
            if request_id not in woken:
                continue
            one = woken[request_id]
            if any(s.delivered and s.kind == policy.FINAL_WARNING for s in sent.get(request_id, [])):
                one = _warned(one, now)
            stepping.append((one, watchers[request_id], _first(one, watchers[request_id], now)))
        said.update(_conclude(stepping, now=now))
    return said


def _alone(request_id: UUID, watcher_id: UUID, *, now: datetime, beat: bool = False) -> str:
    """One case's whole verdict inside the batch's transaction, in a savepoint: a case that fails
    is rolled back alone, logged, and said to be an error; the batch goes on."""
    try:
        with transaction.atomic():
            return _decide(request_id, watcher_id, now=now, beat=beat)
    except Exception:
        logger.exception("watcher step failed request=%s watcher=%s", request_id, watcher_id)
        return "error"


def _warned(woken: locks.Woken, now: datetime) -> locks.Woken:
    """The final warning just went out: eligibility moves if it went out late (its lead holds)."""
    eligible = _eligible_after_warning(woken, now)
    if eligible == woken.eligible_at:
        return woken
    reason = (
        f"the final warning went out at {present.absolute(now)}, later than planned; eligibility moves from "
        f"{present.absolute(woken.eligible_at)} to {present.absolute(eligible)} so its 24 h notice holds"
    )
    steps.move_eligibility(woken.request_id, eligible_at=eligible, reason=reason, now=now)
    return replace(woken, eligible_at=eligible)


def _decide(request_id: UUID, watcher_id: UUID, *, now: datetime, beat: bool = False) -> str:
    """The boundary's whole verdict under the locks the caller holds, applied by the store."""
    request, workspace = locks.lock_request(request_id)
    watcher = locks.lock_watcher(watcher_id)
    if watcher.status not in ACTIVE_WATCHER:
        return f"watcher {watcher.status}"
    if beat and request.watcher_id == watcher.id:
        steps.beat([(watcher.id, request.id)], now=now)
        crash_point("watcher-woke")
    requester = request.requested_by
    verdict = policy.point_of_no_return(
        policy.BoundaryFacts(
            now=now,
            request_status=request.status,
            eligible_at=request.eligible_at,
            watcher_is_authoritative=request.watcher_id == watcher.id,
            workspace_lifecycle=workspace.lifecycle,
            legal_hold=workspace.legal_hold,
            protected_reason=workspace.protected_reason,
            undelivered_gating=selectors.undelivered_gating(request),
            requester=requester.get_username(),
            requester_active=requester.is_active,
            requester_staff=requester.is_staff,
            requester_permitted=authority.holds_now(requester.pk, "retirements.request_retirement"),
        )
    )
    wake = None
    if verdict.action == policy.WAIT:
        wake = policy.next_wake(
            eligible_at=request.eligible_at,
            pending=store_notices.pending_slots([request.id])[request.id],
            blocked_until=verdict.wake_at if verdict.blocker else None,
        )
    job_id = steps.apply_verdict(verdict, request, workspace, watcher, wake=wake, now=now)
    if job_id is not None:
        transaction.on_commit(lambda: jobs.enqueue_purge(job_id))
    if wake is not None:
        return f"{verdict.action} until {present.absolute(wake)}"
    return verdict.action


def age_alarms(*, now: datetime) -> list[dict[str, str]]:
    """Hourly: alarms for open requests near their watcher's lifetime or held past the hold limit
    (`policy.age_alarms`), each raised once; those whose cause ended are resolved first."""
    lifetime = timedelta(days=settings.RETIREMENT_WATCHER_LIFETIME_DAYS)
    hold_limit = timedelta(days=settings.RETIREMENT_HOLD_ALARM_DAYS)
    store_decisions.resolve_age_alarms(watcher_age=policy.WATCHER_AGE, hold_age=policy.HOLD_AGE, now=now)
    raised = []
    for request in selectors.aged(now=now, lifetime=lifetime, hold_limit=hold_limit, limit=STALL_ALARMS_PER_TICK):
        for kind, message in policy.age_alarms(
            status=request.status, requested_at=request.requested_at, held_at=request.held_at, lifetime=lifetime,
            hold_limit=hold_limit, now=now,
        ):  # fmt: skip
            store_decisions.raise_alarm(kind=kind, request=request, message=message, now=now)
            raised.append({"request": str(request.id), "kind": kind})
    return raised


def _failing(request_ids: list[UUID], error: str, *, now: datetime) -> list[str]:
    """The alarms of a batch whose step failed (`policy.failing`): a watcher that beats and then
    fails is alive, not stalled, and still needs a person once its wake-up is overdue."""
    raised = []
    for request in RetirementRequest.objects.filter(id__in=request_ids):
        why = policy.failing(next_wake_at=request.next_wake_at, error=error, now=now)
        if why:
            store_decisions.raise_alarm(kind=FAILING_ALARM, request=request, message=why, now=now)
            raised.append(str(request.id))
    return raised


def run_due(*, now: datetime, budget: float | None = None) -> dict[str, Any]:
    """Run the due watcher steps (for at most `budget` seconds, RETIREMENT_TICK_SECONDS by
    default, so a tick ends before the next one starts: what is left stays due), run queued
    purges, deliver due notices past the point of no return (even when the purge finished
    first), then record alarms for stalled watchers. The django-q2 schedule and
    `run_watchers` call this."""
    summary: dict[str, Any] = {
        "steps": {}, "notices": 0, "purges": [], "stalled": [], "failing": [], "more_due": False
    }  # fmt: skip
    started = time.monotonic()
    budget = settings.RETIREMENT_TICK_SECONDS if budget is None else budget
    seen: set[UUID] = set()

    def at() -> datetime:
        """Each decision's own time (the clock as it is reached), never before the tick's `now`."""
        return max(now, clock.now())

    while True:  # batches of due steps, oldest wake-up first, until none is left or the time is used
        batch = selectors.due_batch(now, seen=seen, active=ACTIVE_WATCHER, limit=STEP_BATCH)
        if not batch:
            break
        if time.monotonic() - started >= budget:
            summary["more_due"] = True  # the next tick goes on from here
            break
        seen.update(request_id for request_id, _ in batch)
        try:  # each batch's decisions carry their own time, not the tick's start
            said = step_batch(batch, now=at(), skip_locked=True)
        except Exception as exc:
            logger.exception("watcher batch failed: %s", ", ".join(str(r) for r, _ in batch))
            said = dict.fromkeys((r for r, _ in batch), "error")
            summary["failing"] = _failing([r for r, _ in batch], f"{type(exc).__name__}: {exc}", now=at())
        else:
            store_decisions.resolve_failing(list(said), now=at())
        summary["steps"].update({str(r): why for r, why in said.items()})
    # A case that was busy gets one more try, waiting for the lock this time: the other tick
    # may have let go of it without stepping it, and nothing due is left for a minute.
    busy = [rid for rid, said in summary["steps"].items() if said.startswith("busy")]
    summary["busy_first"] = busy
    retried = RetirementRequest.objects.filter(id__in=busy).values_list("id", "watcher_id") if busy else []
    for request_id, watcher_id in retried:
        if summary["more_due"] or time.monotonic() - started >= budget or watcher_id is None:
            summary["more_due"] = True
            break
        try:
            summary["steps"][str(request_id)] = step(watcher_id, now=at(), request_id=request_id)
        except Exception:
            logger.exception("watcher step failed request=%s watcher=%s", request_id, watcher_id)
            summary["steps"][str(request_id)] = "error"
    for job_id in selectors.queued_purges():
        summary["purges"].append(run_purge(job_id, now=at()))
    for slot_id in selectors.due_slot_ids_after_ponr(now):
        summary["notices"] += notices.deliver(slot_id, now=at()) == "delivered"
    for request, why in selectors.detect_stalls(now=now, limit=STALL_ALARMS_PER_TICK, unalarmed=True):
        store_decisions.raise_alarm(kind=STALLED_ALARM, request=request, message=why, now=now)
        summary["stalled"].append({"request": str(request.id), "why": why})
    return summary
