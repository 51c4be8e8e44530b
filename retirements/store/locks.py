"""Locks, inside atomic(), always the workspace before the request."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import overload
from uuid import UUID

from django.db import OperationalError, connection

from core.errors import NotFound, Refused, shown
from core.store import lock_or_not_found
from retirements.models import NoticeSlot, RetirementRequest, RetirementWatcher, Workspace

DECISION_WAIT_MS = 2000  # how long a staff decision waits behind a watcher mid-step before it is refused
BUSY = (
    "the watcher is working on this workspace right now (or another decision is); nothing was recorded: "
    "try again in a moment"
)


class LockBusy(Refused):
    """Another transaction (a watcher mid-step, another decision) held the lock past the wait
    allowed: a one-line refusal, nothing written (its transaction is spent)."""

    def __init__(self, message: str = BUSY) -> None:
        super().__init__(message)


@overload
def lock_request(request_id: UUID | str, *, wait_ms: int | None = None) -> tuple[RetirementRequest, Workspace]: ...
@overload
def lock_request(request_id: UUID | str, *, skip_locked: bool) -> tuple[RetirementRequest, Workspace] | None: ...
def lock_request(
    request_id: UUID | str, *, skip_locked: bool = False, wait_ms: int | None = None
) -> tuple[RetirementRequest, Workspace] | None:
    """Lock workspace, then request: the one lock order every writer follows. `skip_locked`:
    None at once when another transaction holds either (a watcher tick leaves it to that one).
    `wait_ms`: wait at most that long for them, then LockBusy (the transaction is then spent)."""
    if wait_ms is not None:
        with _at_most(wait_ms):
            return _lock_request(request_id, skip_locked=False)
    return _lock_request(request_id, skip_locked=skip_locked)


def for_decision(request_id: UUID | str) -> tuple[RetirementRequest, Workspace]:
    """A staff decision's locks (workspace, then request), waited for at most DECISION_WAIT_MS: a
    decision behind a watcher mid-step is refused at once in one line (LockBusy), never left to
    the database's 30-second lock timeout and its traceback."""
    return lock_request(request_id, wait_ms=DECISION_WAIT_MS)


@contextmanager
def _at_most(wait_ms: int) -> Iterator[None]:
    """The lock waits inside it last at most `wait_ms`, then LockBusy; after it, the transaction
    waits as it did before."""
    with connection.cursor() as cur:
        cur.execute("SELECT current_setting('lock_timeout')")
        before = cur.fetchone()[0]
        cur.execute("SELECT set_config('lock_timeout', %s, true)", [f"{int(wait_ms)}ms"])
    try:
        yield
    except OperationalError as exc:
        if getattr(exc.__cause__, "sqlstate", "") == "55P03":  # lock_not_available
            raise LockBusy() from None
        raise
    with connection.cursor() as cur:
        cur.execute("SELECT set_config('lock_timeout', %s, true)", [before])


def _lock_request(request_id: UUID | str, *, skip_locked: bool) -> tuple[RetirementRequest, Workspace] | None:
    workspace_id = RetirementRequest.objects.filter(id=request_id).values_list("workspace_id", flat=True).first()
    if workspace_id is None:
        raise NotFound(f"no retirement request with id {request_id}")
    # By key, so no ORDER BY (first() would add one, and its compiling costs more than the lock).
    workspace = next(
        iter(Workspace.objects.select_for_update(skip_locked=skip_locked).filter(id=workspace_id)[:1]), None
    )
    request = next(
        iter(  # the request row only: its requester's user row is shared by many cases
            RetirementRequest.objects.select_for_update(skip_locked=skip_locked, of=("self",))
            .select_related("requested_by")
            .filter(id=request_id)[:1]
        ),
        None,
    )
    if workspace is None or request is None:
        if skip_locked:
            return None
        raise NotFound(f"no retirement request with id {request_id}")
    return request, workspace


def lock_workspace(slug: str) -> Workspace:
    """A staff decision's lock of a workspace, waited for as `for_decision` waits."""
    with _at_most(DECISION_WAIT_MS):
        workspace = Workspace.objects.select_for_update().filter(slug=slug).first()
    if workspace is None:
        raise NotFound(f"no workspace with slug {shown(slug)}")
    return workspace


def lock_watcher(watcher_id: UUID) -> RetirementWatcher:
    return lock_or_not_found(RetirementWatcher.objects.all(), watcher_id, "watcher")


def lock_current_watcher(request: RetirementRequest) -> RetirementWatcher | None:
    if request.watcher_id is None:
        return None
    return RetirementWatcher.objects.select_for_update().filter(id=request.watcher_id).first()


def lock_slot(slot_id: int) -> NoticeSlot:
    return (
        NoticeSlot.objects.select_for_update()
        .select_related("request__workspace", "request__requested_by")
        .get(id=slot_id)
    )


_WAKE = """
    SELECT r.id, r.status, r.eligible_at, r.watcher_id, r.requested_at, u.username, u.email, w.slug, w.name
    FROM retirements_retirementrequest r
    JOIN retirements_workspace w ON w.id = r.workspace_id
    JOIN auth_user u ON u.id = r.requested_by_id
    WHERE r.id = ANY(%s::uuid[]) ORDER BY r.id FOR UPDATE OF w, r"""


@dataclass(frozen=True)
class Woken:
    """A request as the watcher's quick step locked it: what the boundary's first rules read,
    and what its notices name. Whether the quick step applies is the policy's call."""

    request_id: UUID
    status: str
    watcher_id: UUID | None
    eligible_at: datetime
    requested_at: datetime
    requester: str
    requester_email: str
    slug: str
    name: str


def lock_waiting(request_ids: list[UUID], *, skip_locked: bool) -> tuple[dict[UUID, Woken], set[UUID]]:
    """Lock the workspaces and requests of a watcher tick's batch (inside atomic()) and read
    them, in two statements at most: the woken by request, and those that were busy (skipped as
    locked by another transaction). A request in neither does not exist.

    Waiting for the locks, every workspace is locked before any request, in id order, as every
    writer takes them (workspace first), so a batch never deadlocks with a writer or another
    batch; skipping never waits."""
    with connection.cursor() as cur:
        if not skip_locked:
            cur.execute(
                "SELECT 1 FROM retirements_workspace WHERE id IN"
                " (SELECT workspace_id FROM retirements_retirementrequest WHERE id = ANY(%s::uuid[]))"
                " ORDER BY id FOR UPDATE",
                [request_ids],
            )
        cur.execute(_WAKE + (" SKIP LOCKED" if skip_locked else ""), [request_ids])
        rows = cur.fetchall()
    woken = {
        row[0]: Woken(row[0], row[1], row[3], row[2], row[4], row[5], row[6] or "", row[7], row[8]) for row in rows
    }
    missing = [r for r in request_ids if r not in woken]
    busy: set[UUID] = set()
    if missing and skip_locked:
        busy = set(RetirementRequest.objects.filter(id__in=missing).values_list("id", flat=True))
    return woken, busy
