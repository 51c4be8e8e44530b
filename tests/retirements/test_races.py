"""Competing decisions on one request serialize on the workspace and request locks."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from core.authority import Actor
from core.errors import Refused
from retirements.models import PurgeJob
from retirements.services import retirement_cancel, retirement_hold
from retirements.watcher import step
from tests.retirements.helpers import fresh, request_at, run_at
from tests.support import race

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_holds_race_exactly_one_wins(hq, other_staff, make_workspace) -> None:
    make_workspace()
    req = request_at(timezone.now(), hq)
    actors = [hq, other_staff]
    results = race(2, lambda i: retirement_hold(actor=Actor.of(actors[i]), request_id=req.id, reason=f"hold {i}"))
    refused = [r for r in results if isinstance(r, Refused)]
    assert len(refused) == 1 and "already held" in refused[0].message
    assert fresh(req).decisions.filter(action="hold").count() == 1


def test_hold_and_cancel_race_serialize(hq, other_staff, make_workspace) -> None:
    """Cancel works on a held request, so the loser of this race is refused only when cancel wins first."""
    for n in range(4):
        make_workspace(f"race-{n}")
        req = request_at(timezone.now(), hq, slug=f"race-{n}")

        def decide(i: int, rid=req.id):
            if i == 0:
                return retirement_hold(actor=Actor.of(hq), request_id=rid, reason="hold")
            return retirement_cancel(actor=Actor.of(other_staff), request_id=rid, reason="cancel")

        hold_result, cancel_result = race(2, decide)
        assert not isinstance(cancel_result, Exception), cancel_result
        after = fresh(req)
        assert after.status == "cancelled" and after.workspace.lifecycle == "disabled"
        actions = list(after.decisions.order_by("id").values_list("action", flat=True))
        if isinstance(hold_result, Refused):
            assert "already cancelled" in hold_result.message and actions == ["request", "cancel"]
        else:
            assert actions == ["request", "hold", "cancel"]


def test_cancel_and_point_of_no_return_race_exactly_one_wins(hq, other_staff, make_workspace, observe) -> None:
    winners = []
    for n in range(6):
        slug = f"ponr-{n}"
        make_workspace(slug, activated=False)
        start = timezone.now()
        req = request_at(start, hq, slug=slug)
        run_at(start)
        eligible = start + timedelta(days=1)

        def contend(i: int, rid=req.id, wid=req.watcher_id, when=eligible):
            with time_machine.travel(when, tick=False):
                if i == 0:
                    return retirement_cancel(actor=Actor.of(other_staff), request_id=rid, reason="stop")
                return step(wid, now=when)

        cancel_result, step_result = race(2, contend)
        after = fresh(req)
        if isinstance(cancel_result, Refused):
            assert "past the point of no return" in cancel_result.message
            assert after.status == "executing" and after.workspace.lifecycle == "deleting"
            assert PurgeJob.objects.filter(request=req).count() == 1
        else:
            assert after.status == "cancelled" and after.workspace.lifecycle == "disabled"
            assert not PurgeJob.objects.filter(request=req).exists()
            assert step_result in ("watcher settled", "conclude")
        winners.append(after.status)
    observe(f"6 cancel/boundary races, one winner each: {', '.join(winners)}")


def test_two_watcher_steps_racing_at_the_boundary_make_one_purge_job(hq, make_workspace, observe) -> None:
    from retirements.watcher import boundary

    make_workspace(activated=False)
    T = timezone.now() - timedelta(days=2)
    req = request_at(T, hq)
    run_at(T)  # notices delivered
    watcher_id = fresh(req).watcher_id
    assert watcher_id is not None
    eligible = fresh(req).eligible_at + timedelta(minutes=1)
    results = race(2, lambda i: boundary(watcher_id, now=eligible))
    assert sorted(results) == ["proceed", "watcher settled"], results
    assert PurgeJob.objects.filter(request=req).count() == 1
    assert fresh(req).decisions.filter(action="point_of_no_return").count() == 1
    observe(f"2 steps at the boundary at once: {sorted(results)}; purge jobs {PurgeJob.objects.count()}")
