"""Custody without holes (issue 43, item 6): every open case has a next check and a deadline,
its backup is never its owner (the database refuses it), and a hold at the point of no return
tells the person who now holds it, by name."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction

from core import clock
from core.authority import Actor, named
from deletions.models import DeletionRequest
from deletions.rules.custody import REVIEW_WINDOW
from deletions.services import deletion_submit
from retirements import selectors
from retirements.models import Alarm, RetirementRequest
from retirements.services import retirement_hold, retirement_release
from tests.retirements.helpers import fresh, request_at

pytestmark = pytest.mark.django_db
T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def test_a_deletion_waiting_for_approval_has_a_next_check() -> None:
    with time_machine.travel(T, tick=False):
        req = deletion_submit(target="demo:waits", actor=named("operator-a"))
    assert DeletionRequest.objects.get(id=req.id).next_check_at == T + REVIEW_WINDOW


def test_a_retirement_has_a_next_check_and_a_deadline_waiting_and_held(hq, make_workspace, settings) -> None:
    settings.RETIREMENT_HOLD_ALARM_DAYS = 90
    make_workspace()
    req = request_at(T, hq)
    shown = selectors.describe(fresh(req))
    assert shown["deadline"] == (T + 30 * DAY).isoformat() and shown["next_check_at"] is not None
    with time_machine.travel(T + DAY, tick=False):
        retirement_hold(actor=Actor.of(hq), request_id=req.id, reason="legal review")
    held = selectors.describe(fresh(req))
    assert held["next_check_at"] == held["deadline"] == (T + DAY + 90 * DAY).isoformat()


def test_the_database_refuses_a_backup_who_is_the_owner(hq, make_workspace) -> None:
    make_workspace()
    req = request_at(T, hq)
    deletion_submit(target="demo:custody", actor=named("operator-a"))
    approver = User.objects.get(username="operator-b")  # one who may hold the deletion: the rule refused is this one
    for table, person, who in (
        ("retirements_retirementrequest", "owner_id", hq),
        ("entity_deletion_requests", "assignee_id", approver),
    ):
        refused = pytest.raises(IntegrityError, match="backup_is_another_person")
        with refused, transaction.atomic(), connection.cursor() as cur:
            cur.execute(f"UPDATE {table} SET {person} = %s, backup_id = %s", [who.pk, who.pk])
    assert fresh(req).owner_id != fresh(req).backup_id


def test_who_holds_a_retirement_never_becomes_its_own_backup(hq, other_staff, make_workspace) -> None:
    make_workspace()
    req = request_at(T, hq)
    RetirementRequest.objects.filter(id=req.id).update(owner=hq, backup=other_staff)
    with time_machine.travel(T + DAY, tick=False):
        retirement_hold(actor=Actor.of(other_staff), request_id=req.id, reason="customer disputes")
    held = fresh(req)
    assert (held.owner_id, held.backup_id) == (other_staff.pk, hq.pk)  # the former owner covers
    with time_machine.travel(T + 2 * DAY, tick=False):
        retirement_release(actor=Actor.of(other_staff), request_id=req.id, reason="settled")


def test_a_hold_at_the_point_of_no_return_tells_its_new_owner_by_name(hq, make_workspace) -> None:
    from django.core import mail

    from ops import notify
    from retirements.watcher import run_due

    make_workspace()
    req = request_at(T, hq)
    for at in (T, T + 23 * DAY, T + 29 * DAY):
        with time_machine.travel(at, tick=False):
            run_due(now=clock.now())
    hq.is_active = False  # the requester lost authority: the boundary holds it
    hq.save()
    with time_machine.travel(T + 30 * DAY, tick=False):
        run_due(now=clock.now())
        held = fresh(req)
        assert held.status == "held" and held.owner_id is not None and held.owner_id != hq.pk
        alarm = Alarm.objects.get(request=req, kind="held_at_point_of_no_return", resolved_at__isnull=True)
        assert "release or cancel it" in alarm.message
        mail.outbox.clear()
        notify.tick(clock.now())
    owner = held.owner
    assert owner is not None
    assert any(owner.email in m.to and "point of no return" in m.body for m in mail.outbox), [
        (m.to, m.subject) for m in mail.outbox
    ]
