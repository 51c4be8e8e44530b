"""A watcher tick is bounded: it stops after its time budget (what is left stays due for the
next tick), and a case another tick holds is left to that tick instead of waited for."""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction
from django.utils import timezone

from core import clock
from retirements.models import RetirementRequest, Workspace
from retirements.watcher import run_due
from tests.retirements.helpers import fresh, request_at

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


def test_a_case_held_by_another_transaction_is_skipped_not_waited_for(hq, make_workspace) -> None:
    make_workspace("held-elsewhere")
    make_workspace("free")
    held = request_at(timezone.now(), hq, slug="held-elsewhere")
    free = request_at(timezone.now(), hq, slug="free")
    locked, release = threading.Event(), threading.Event()

    def hold_lock() -> None:
        try:
            with transaction.atomic():
                Workspace.objects.select_for_update().get(slug="held-elsewhere")
                locked.set()
                assert release.wait(timeout=120)
        finally:
            connections.close_all()

    other = threading.Thread(target=hold_lock)
    other.start()
    try:
        assert locked.wait(timeout=120)
        ran = run_due(now=clock.now(), budget=60)
    finally:
        release.set()
        other.join(timeout=120)
    assert ran["steps"][str(held.id)] == "busy: another tick holds this case"
    assert ran["steps"][str(free.id)].startswith("wait until")
    wake = RetirementRequest.objects.get(id=held.id).next_wake_at
    assert wake is not None and wake <= clock.now()  # still due for the next tick
