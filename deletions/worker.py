"""The worker: claim, heartbeat, dispatch, repeat, release. No branching.

It never inspects handler results or chooses branches; `get_next_stage`
decides. The heartbeat runs beside the handler on its own connection, renews
the lease every ten seconds and is joined before the lease is released, so it
never outlives the run.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from uuid import UUID

from django.conf import settings
from django.db import connections

from core import clock, present
from core.crashpoints import crash_point
from deletions import targets
from deletions.contract import Finished, Lease, NextStage, StageSnapshot, WaitUntil
from deletions.errors import DeletionError, Interrupted, Refused, StaleLease
from deletions.handlers import HandlerContext, RunOptions, run_handler
from deletions.models import Status
from deletions.rules import custody
from deletions.rules.workflow import Plan
from deletions.selectors import get_request
from deletions.store import approvals, leases
from deletions.targets.base import TargetUnreachable
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


class Heartbeat(threading.Thread):
    """Renews the lease on its own connection; sets `lost` if ownership is gone."""

    def __init__(self, lease: Lease, stop: threading.Event, interval: float, lease_seconds: int) -> None:
        super().__init__(name=f"heartbeat-{lease.request_id}", daemon=True)
        self.lease = lease
        self.run_stop = stop
        self.interval = interval
        self.lease_seconds = lease_seconds
        self.finished = threading.Event()
        self.lost = threading.Event()

    def run(self) -> None:
        try:
            while not self.finished.wait(self.interval):
                if not leases.heartbeat(self.lease, now=clock.now(), lease_seconds=self.lease_seconds):
                    if self.finished.is_set():  # the run ended (and may have released the lease) meanwhile
                        return
                    logger.warning("lease lost request=%s generation=%s", self.lease.request_id, self.lease.generation)
                    self.lost.set()
                    self.run_stop.set()
                    return
        except Exception:
            logger.exception("heartbeat failed request=%s", self.lease.request_id)
            self.lost.set()
            self.run_stop.set()
        finally:
            connections.close_all()

    def stop(self) -> None:
        self.finished.set()
        self.join()


def run(
    request_id: UUID,
    *,
    executor_id: str,
    next_step: bool = False,
    options: RunOptions | None = None,
    budget: int | None = None,
    stop: threading.Event | None = None,
    time_budget: float | None = None,
) -> RunOutcome:
    options = options or RunOptions()
    budget = settings.DELETION_HANDLER_BUDGET if budget is None else budget
    stop = stop or threading.Event()
    req = get_request(request_id)
    if req.status == Status.COMPLETED:
        return RunOutcome(
            0, f"request {req.id} already completed at {present.absolute(req.completed_at)}; nothing changed", 0
        )
    if req.status == Status.APPROVED:
        now = clock.now()
        expired = approvals.expire_if_due(
            request_id=req.id,
            now=now,
            custody=lambda approver, expires_at: custody.expired(approver=approver, expires_at=expires_at, now=now),
        )
        if expired:
            raise Refused(expired)
    target = targets.for_target(req.target)
    try:
        fence = target.fence(req.id)
    except TargetUnreachable as exc:
        raise Refused(f"{exc.message}: its fence cannot be read, so nothing was claimed or sent") from None
    lease = leases.claim(
        request_id=req.id,
        owner=executor_id,
        now=clock.now(),
        lease_seconds=settings.DELETION_LEASE_SECONDS,
        past=fence,
    )
    crash_point("after-claim")
    req = get_request(request_id)  # read under this lease: the plan is the inventory as it is now
    plan = Plan.of(req.inventory_json)  # immutable (trigger); each grant checks the community is in it
    heartbeat = Heartbeat(lease, stop, settings.DELETION_HEARTBEAT_SECONDS, settings.DELETION_LEASE_SECONDS)
    heartbeat.start()
    handled = 0
    started = time.monotonic()
    nxt: NextStage | None = None
    try:
        nxt = start(lease, req.status, req.inventory_json, req.inventory_version, now=clock.now())
        while isinstance(nxt, StageSnapshot):
            if handled >= budget:
                return RunOutcome(0, f"budget of {budget} handler calls used; {nxt.stage} is next", handled, True)
            if time_budget is not None and time.monotonic() - started >= time_budget:
                return RunOutcome(0, f"time budget of {time_budget:g} s used; {nxt.stage} is next", handled, True)
            if stop.is_set():
                raise Interrupted(f"stopped before {nxt.stage}; the row stays current")
            saved = run_handler(HandlerContext(lease=lease, options=options, plan=plan, target=target, stop=stop), nxt)
            handled += 1
            nxt = next_stage(lease, plan, saved, now=clock.now())  # the handler saved its outcome; what next
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
        heartbeat.stop()
        if not (isinstance(nxt, Finished) and nxt.lease_released):
            leases.release(lease, now=clock.now())  # a stale release is refused and logged by the store


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
