"""The worker: claim, heartbeat, dispatch, repeat, release. No branching.

It never inspects handler results or chooses branches; `get_next_stage`
decides. The process's heartbeat thread (one per worker process, not one per
run) renews the run's lease on its own connection every ten seconds; the run
lets go of it before the lease is released, so no renewal outlives the run.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn
from uuid import UUID

from django.conf import settings
from django.db import connections

from core import clock, present
from core.crashpoints import crash_point
from core.logs import event
from deletions import selectors, services, targets
from deletions.contract import Finished, Lease, NextStage, StageSnapshot, WaitUntil
from deletions.errors import AlreadyCompleted, ApprovalExpired, DeletionError, Interrupted, Refused, StaleLease
from deletions.handlers import HandlerContext, RunOptions, run_handler
from deletions.models import TERMINAL_STATUSES as ENDED
from deletions.models import Status
from deletions.rules import custody
from deletions.rules.workflow import Plan
from deletions.store import approvals, leases
from deletions.targets.base import Adapter, TargetUnreachable
from deletions.transition import next_stage, start

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOutcome:
    exit_code: int
    message: str
    handlers_run: int
    more_to_do: bool = False
    stage_failed: bool = False  # the run ended on a saved stage failure (retry later or needs attention)
    refused: bool = False  # the run ended with the case back in review: an effect was refused


@dataclass
class _Held:
    """One run's lease as the process's heartbeat holds it."""

    lease: Lease
    stop: threading.Event
    interval: float
    lease_seconds: int
    due: float  # monotonic time of its next renewal
    lost: threading.Event = field(default_factory=threading.Event)
    finished: bool = False
    renewing: threading.Lock = field(default_factory=threading.Lock)  # held while its renewal runs


class Heartbeats:
    """One heartbeat thread per worker process, on its own connection, renewing the lease of every
    run the process has going (threads of one process run several), each every `interval` from
    its run's start; a lease it finds lost (or cannot renew) stops its run. A run lets go of its
    lease before releasing it, and letting go waits for a renewal in flight, so no renewal
    outlives its run. Started at the first run of a process (a forked worker starts its own)."""

    def __init__(self) -> None:
        self._held: dict[int, _Held] = {}
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def hold(self, lease: Lease, stop: threading.Event, interval: float, lease_seconds: int) -> _Held:
        held = _Held(lease, stop, interval, lease_seconds, due=time.monotonic() + interval)
        with self._changed:
            self._held[id(held)] = held
            if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._beat, name="lease-heartbeat", daemon=True)
                self._thread.start()
            self._changed.notify()
        return held

    def let_go(self, held: _Held) -> None:
        with held.renewing:  # a renewal in flight ends first
            held.finished = True
        with self._changed:
            self._held.pop(id(held), None)
            self._changed.notify()  # the last one gone: the thread closes its connection

    def _beat(self) -> None:
        connected = False
        while True:
            with self._changed:
                idle = not self._held
            if idle and connected:  # no run going: no connection kept open for nothing
                connections.close_all()
                connected = False
            with self._changed:
                now = time.monotonic()
                due = [h for h in self._held.values() if h.due <= now]
                if not due:
                    wait = min((h.due for h in self._held.values()), default=now + 60) - now
                    self._changed.wait(timeout=max(wait, 0.01))
                    continue
            for held in due:
                connected = True
                self._renew(held)

    def _renew(self, held: _Held) -> None:
        with held.renewing:
            if held.finished:
                return
            held.due = time.monotonic() + held.interval
            try:
                renewed = leases.heartbeat(held.lease, now=clock.now(), lease_seconds=held.lease_seconds)
            except Exception:
                logger.exception("heartbeat failed request=%s", held.lease.request_id)
                connections.close_all()  # the next renewal opens a fresh connection
                renewed = False
            else:
                if not renewed:
                    logger.warning("lease lost request=%s generation=%s", held.lease.request_id, held.lease.generation)
            if not renewed:
                held.lost.set()
                held.stop.set()
                held.finished = True
        if held.finished:
            with self._changed:
                self._held.pop(id(held), None)


HEARTBEATS = Heartbeats()


def run(
    request_id: UUID,
    *,
    executor_id: str,
    next_step: bool = False,
    options: RunOptions | None = None,
    budget: int | None = None,
    stop: threading.Event | None = None,
    time_budget: float | None = None,
    told_to_stop: Callable[[], bool] = lambda: False,
    target: str | None = None,
) -> RunOutcome:
    """`stop` interrupts the run (a lost lease, a signal), waits included; `told_to_stop` (its
    cluster is stopping) is asked between stages only, so a stage in progress finishes first.
    `target`: the request's, when its caller knows it (a queued task), else read."""
    options = options or RunOptions()
    budget = settings.DELETION_HANDLER_BUDGET if budget is None else budget
    stop = stop or threading.Event()
    try:
        claimed, adapter = _claim(request_id, executor_id, target)
    except AlreadyCompleted as done:
        return RunOutcome(0, done.message, 0)
    lease = claimed.lease
    crash_point("after-claim")
    plan = Plan.of(claimed.inventory, claimed.digest)  # read under this lease; each grant checks its digest
    heartbeat = HEARTBEATS.hold(lease, stop, settings.DELETION_HEARTBEAT_SECONDS, settings.DELETION_LEASE_SECONDS)
    handled = 0
    started = time.monotonic()
    nxt: NextStage | None = None
    try:
        nxt = start(lease, claimed.status, claimed.inventory, claimed.inventory_version, now=clock.now())
        while isinstance(nxt, StageSnapshot):
            if handled >= budget:
                return RunOutcome(0, f"budget of {budget} handler calls used; {nxt.stage} is next", handled, True)
            if time_budget is not None and time.monotonic() - started >= time_budget:
                return RunOutcome(0, f"time budget of {time_budget:g} s used; {nxt.stage} is next", handled, True)
            if stop.is_set() or told_to_stop():
                raise Interrupted(f"stopped before {nxt.stage}; the row stays current")
            ctx = HandlerContext(lease=lease, options=options, plan=plan, target=adapter, stop=stop)
            believed = run_handler(ctx, nxt)
            handled += 1
            nxt = next_stage(lease, plan, believed, now=clock.now())  # its evidence saved with what comes next
            if isinstance(nxt, StageSnapshot):
                crash_point("after-transition")  # the successor saved, not yet run
            elif isinstance(nxt, Finished):
                crash_point("after-terminal-commit")
            if next_step:
                break
        return _outcome(nxt, handled)
    except Interrupted as exc:
        if heartbeat.lost.is_set():
            raise StaleLease(f"lease of {executor_id} generation {lease.generation} was lost: {exc.message}") from exc
        raise Interrupted(f"{exc.message}; the lease of {executor_id} is released") from exc
    except DeletionError as exc:
        if heartbeat.lost.is_set() and not isinstance(exc, StaleLease):
            raise StaleLease(f"lease of {executor_id} generation {lease.generation} was lost: {exc.message}") from exc
        raise
    finally:
        HEARTBEATS.let_go(heartbeat)
        if not (isinstance(nxt, Finished) and nxt.lease_released):
            leases.release(lease, now=clock.now())  # a stale release is refused and logged by the store
        if isinstance(nxt, WaitUntil) or (isinstance(nxt, Finished) and nxt.status not in ENDED):
            services.deletion_name_now(lease.request_id)  # waiting on a person: name one now


def _claim(request_id: UUID, executor_id: str, target: str | None) -> tuple[leases.Claimed, Adapter]:
    """The run's target system and lease. The target's fence is read first (a run given no target, a
    command's, reads the request's), so the claim takes a generation past it (after the case database
    was restored from a backup the saved one may be one the target already saw), in one statement that
    returns what the run reads (its status, inventory and target). Nothing is claimed when the target
    does not answer, when the request has completed (exit 0), or when an approved request's approval
    expired (it goes back to review)."""
    named = target if target is not None else selectors.target_of(request_id)
    adapter = targets.for_target(named)
    try:
        fence = adapter.fence(request_id)
    except TargetUnreachable as exc:
        # What needs no target is settled all the same: a completed request, an expired approval.
        settled = leases.claim_refusal(request_id, clock.now())
        if isinstance(settled, AlreadyCompleted):
            raise settled from None
        if isinstance(settled, ApprovalExpired):
            _expire(request_id, settled)
        # Said where people look: the case page, the overview and health read the note; the log has it.
        silent = targets.unanswered(adapter, exc.message, now=clock.now()) or exc.message
        event(
            logger,
            "receiver_unanswered",
            logging.WARNING,
            request_id=request_id,
            executor=executor_id,
            reason=f"{silent}: its fence cannot be read, so nothing was claimed or sent",
        )
        raise Refused(f"{exc.message}: its fence cannot be read, so nothing was claimed or sent") from None
    targets.answered(adapter)  # a note that it did not answer is cleared (written only when there is one)
    now = clock.now()
    try:
        claimed = leases.claim_run(
            request_id=request_id,
            owner=executor_id,
            now=now,
            lease_seconds=settings.DELETION_LEASE_SECONDS,
            past=fence,
        )
    except ApprovalExpired as exc:
        _expire(request_id, exc)
    if claimed.target != named:  # a task naming another target than the request's: its fence was not read
        leases.release(claimed.lease, now=clock.now())
        raise Refused(f"request {request_id} is for another target than the one its run named; nothing was sent")
    return claimed, adapter


def _expire(request_id: UUID, exc: ApprovalExpired) -> NoReturn:
    """An approved, unstarted request whose approval expired goes back to review (under its lock)."""
    now = clock.now()
    expired = approvals.expire_if_due(
        request_id=request_id,
        latest_expiry=exc.expires_at,
        now=now,
        custody=lambda approver, expires_at: custody.expired(approver=approver, expires_at=expires_at, now=now),
    )
    raise Refused(expired or exc.message) from None


def _outcome(nxt: StageSnapshot | Finished | WaitUntil, handled: int) -> RunOutcome:
    if isinstance(nxt, StageSnapshot):
        where = f" for community {nxt.community_id}" if nxt.community_id else ""
        return RunOutcome(0, f"ran {handled} handler(s); next: {nxt.stage}{where}, {nxt.status}", handled)
    if isinstance(nxt, WaitUntil):
        return RunOutcome(1, f"stage failed; retry not before {present.absolute(nxt.at)}", handled, stage_failed=True)
    if nxt.status == Status.NEEDS_ATTENTION:
        return RunOutcome(
            1,
            f"waiting for an operator: {nxt.note}"
            if nxt.note
            else "stage failed too many times in a row; the request needs an operator to resume it",
            handled,
            stage_failed=True,
        )
    if nxt.status == Status.NEEDS_REVIEW:
        return RunOutcome(1, f"back in review, nothing applied: {nxt.note}", handled, refused=True)
    if nxt.status == Status.CANCELLED:
        return RunOutcome(
            1, f"request cancelled; {nxt.completed_stages} completed stage(s) are done and were not undone", handled
        )
    return RunOutcome(0, f"request completed ({nxt.completed_stages} stages)", handled)
