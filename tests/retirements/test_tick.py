"""A watcher tick is bounded: it stops after its time budget (what is left stays due for the
next tick), and a case another tick holds is left to that tick instead of waited for."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.core import mail
from django.db import connection, connections, transaction
from django.utils import timezone

from core import clock
from retirements.models import RetirementRequest, RetirementWatcher, Workspace
from retirements.notices import SUBJECTS
from retirements.watcher import run_due
from tests.retirements.helpers import fresh, request_at
from tests.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_tick_stops_at_its_budget_and_the_next_goes_on(hq, make_workspace, observe) -> None:
    requests = []
    for n in range(3):
        make_workspace(f"tick-{n}")
        requests.append(request_at(timezone.now(), hq, slug=f"tick-{n}"))  # each wakes at once (request_received)
    stopped = run_due(now=clock.now(), budget=0)
    assert stopped["steps"] == {} and stopped["more_due"] is True
    assert all((fresh(r).next_wake_at or clock.now()) <= clock.now() for r in requests)  # nothing lost: still due
    assert all(fresh(r).next_wake_at is not None for r in requests)
    ran = run_due(now=clock.now(), budget=60)
    assert set(ran["steps"]) == {str(r.id) for r in requests} and ran["more_due"] is False
    assert all(fresh(r).notices.filter(kind="request_received", status="delivered").exists() for r in requests)
    observe(f"budget 0: 0 steps, more due; next tick: {len(ran['steps'])} steps, each request_received delivered")


def test_a_case_held_by_another_transaction_is_passed_over_then_stepped_once_free(hq, make_workspace) -> None:
    """The first pass skips a case whose lock another transaction holds and steps the rest; at
    the end of the tick it waits for that lock, and steps the case once it is let go."""
    make_workspace("held-elsewhere")
    make_workspace("free")
    held = request_at(timezone.now(), hq, slug="held-elsewhere")
    free = request_at(timezone.now(), hq, slug="free")
    locked, release = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def hold_lock() -> None:
        try:
            with transaction.atomic():
                Workspace.objects.select_for_update().get(slug="held-elsewhere")
                locked.set()
                assert release.wait(timeout=120)
        finally:
            connections.close_all()

    def tick() -> None:
        try:
            outcome["ran"] = run_due(now=clock.now(), budget=60)
        finally:
            connections.close_all()

    holder, ticker = threading.Thread(target=hold_lock), threading.Thread(target=tick)
    holder.start()
    try:
        assert locked.wait(timeout=120)
        ticker.start()
        wait_for(lambda: _waiting_on_a_lock(), timeout=120, what="the tick's second pass waiting for the lock")
        assert fresh(free).notices.filter(kind="request_received", status="delivered").exists()  # first pass
        assert not fresh(held).notices.filter(status="delivered").exists()
    finally:
        release.set()
        holder.join(timeout=120)
        ticker.join(timeout=120)
    ran = outcome["ran"]
    assert ran["busy_first"] == [str(held.id)]
    assert ran["steps"][str(held.id)].startswith("wait until") and ran["steps"][str(free.id)].startswith("wait until")
    assert fresh(held).notices.filter(kind="request_received", status="delivered").exists()


def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return cur.fetchone()[0] > 0


def _walk(hq: Any, slug: str) -> tuple[list[str], dict[str, Any]]:
    """Request a retirement and run the watcher at each wake-up before eligibility."""
    request = request_at(timezone.now(), hq, slug=slug)
    said = []
    for _ in range(6):
        wake = fresh(request).next_wake_at
        if wake is None or wake >= request.eligible_at:
            break
        with time_machine.travel(wake, tick=False):
            said.append(run_due(now=clock.now(), budget=60)["steps"][str(request.id)])
    after, watcher = fresh(request), RetirementWatcher.objects.get(request=request)
    state = {
        "request": (after.status, after.next_wake_at, after.blocker, after.blocked_until, after.updated_at),
        "watcher": (watcher.status, watcher.started_at, watcher.heartbeat_at),
        "slots": sorted(after.notices.values_list("kind", "status", "attempts", "delivered_at", "claimed_by")),
        "mails": [str(m.subject).replace(slug, "*") for m in mail.outbox if slug in str(m.subject)],
    }
    return said, state


def test_one_step_walks_the_whole_wait_in_due_order(hq, make_workspace) -> None:
    """Every wake-up before eligibility takes the same step (the writers the boundary shares):
    each notice goes out once, in due order, and the request waits for the next."""
    make_workspace("walk")
    said, state = _walk(hq, "walk")
    assert len(said) >= 3 and all(s.startswith("wait until") for s in said), said  # each notice woke it
    assert state["request"][0] == "waiting" and state["request"][2] == "" and state["request"][3] is None
    assert state["watcher"][0] == "running" and state["watcher"][2] is not None
    delivered = [kind for kind, status, attempts, *_ in state["slots"] if status == "delivered" and attempts == 1]
    assert len(delivered) == len(said)
    by_due = list(
        RetirementRequest.objects.get(workspace__slug="walk").notices.filter(status="delivered").order_by("due_at")
    )
    expected = [SUBJECTS[n.kind].split("{")[0] for n in by_due]
    sent = [str(m.subject) for m in mail.outbox if "walk" in str(m.subject)]
    assert [m.startswith(e) for m, e in zip(sent, expected, strict=True)] == [True] * len(sent), (sent, expected)


def test_due_notices_are_sent_in_due_order_whatever_their_ids(hq, make_workspace) -> None:
    """Slots whose ids run against their due times (as after a hold and a release that adds a
    reminder): the earliest due is sent first. The order of the mails is compared."""
    from retirements.models import NoticeSlot, NoticeStatus

    make_workspace("order")
    start = timezone.now()
    request = request_at(start, hq, slug="order")
    run_due(now=start)  # request_received goes out
    pending = list(NoticeSlot.objects.filter(request=request, status=NoticeStatus.PENDING).order_by("id"))
    assert len(pending) >= 2, pending
    for n, slot in enumerate(reversed(pending)):  # the highest id is due first
        NoticeSlot.objects.filter(id=slot.id).update(due_at=start + timedelta(hours=1 + n), moved_because=f"test {n}")
    request.__class__.objects.filter(id=request.id).update(next_wake_at=start + timedelta(hours=1))
    mail.outbox.clear()
    with time_machine.travel(start + timedelta(hours=len(pending) + 1), tick=False):
        said = run_due(now=clock.now(), budget=60)["steps"][str(request.id)]
    by_due = NoticeSlot.objects.filter(id__in=[s.id for s in pending]).order_by("due_at", "id")
    expected = [SUBJECTS[s.kind].split("{")[0] for s in by_due]
    sent = [str(m.subject) for m in mail.outbox]
    assert len(sent) == len(expected), (said, sent)
    assert [s.startswith(e) for s, e in zip(sent, expected, strict=True)] == [True] * len(sent), (sent, expected)
    assert [s.id for s in by_due] == [s.id for s in reversed(pending)]
