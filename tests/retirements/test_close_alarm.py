"""A retirement's alarm that no state move answers (a late purge executor rejected at the
boundary: `purge_stale_executor`) is closed by a named person with a reason: a decision on the
case, which the alarm row names; every other alarm closes only with the move that answers it."""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from core.authority import Actor
from core.errors import BadInput, NotAllowed, Refused
from retirements import purge
from retirements.contract import ANSWERED_BY_A_MOVE
from retirements.models import Alarm, Decision, PurgeJob
from retirements.services import retirement_close_alarm
from tests.retirements.conftest import make_staff, retirement_rows
from tests.retirements.helpers import BUSY, behind_a_watcher_mid_step, executing, fresh, reject_a_stale_executor

pytestmark = pytest.mark.django_db(transaction=True)

STALE = "purge_stale_executor"
FOUND = "vm-3 was suspended for a snapshot past the lease; snapshots now skip workers"


def stale_in_process(hq, make_workspace, slug: str = "acme-old"):
    """A completed purge, then a late executor of the generation before: rejected, alarm raised."""
    req, job = executing(hq, make_workspace, slug)
    assert purge.run_purge(job.id, now=timezone.now()).endswith("done")
    generation = PurgeJob.objects.get(id=job.id).lease_generation
    assert "rejected: stale executor" in purge.apply(
        job.id, owner="late", generation=generation - 1, now=timezone.now()
    )
    assert Alarm.objects.filter(request=req, kind=STALE, resolved_at__isnull=True).count() == 1
    return fresh(req)


def changed(before: dict, after: dict) -> dict[str, tuple[list, list]]:
    """The rows of each table that differ: (gone or rewritten, new or rewritten)."""
    return {
        table: (
            [r for r in before[table] if r not in after[table]],
            [r for r in after[table] if r not in before[table]],
        )
        for table in before
        if before[table] != after[table]
    }


def test_an_operator_closes_a_stale_executors_alarm_with_what_they_found(hq, make_workspace, cmd) -> None:
    req, _job, said = reject_a_stale_executor(hq, make_workspace)
    assert "rejected: stale executor executor-a generation 1" in said
    alarm = Alarm.objects.get(request=req, kind=STALE)
    assert alarm.resolved_at is None and alarm.decision_id is None
    before = retirement_rows()

    ran = cmd("close_retirement_alarm", str(req.id), "--kind", STALE, "--by", "operator-a", "--reason", FOUND)

    assert ran.code == 0 and ran.err == "", ran
    alarm.refresh_from_db()
    decision = Decision.objects.get(request=req, action="close_alarm")
    assert decision.actor is not None
    assert (decision.actor.username, decision.actor_label, decision.reason) == (
        "operator-a", "operator-a", f"{STALE}: {FOUND}",
    )  # fmt: skip
    assert alarm.resolved_at == decision.created_at and alarm.decision_id == decision.id
    assert json.loads(ran.out) == {
        "id": str(req.id),
        "status": "completed",
        "closed": STALE,
        "resolved_at": alarm.resolved_at.isoformat(),
        "by": "operator-a",
        "decision": decision.id,
    }
    # Nothing else moved: one alarm resolved (with its decision), one decision row added.
    diff = changed(before, retirement_rows())
    assert set(diff) == {"retirements_alarm", "retirements_decision"}, diff
    assert len(diff["retirements_alarm"][1]) == 1 and diff["retirements_decision"][0] == []
    assert len(diff["retirements_decision"][1]) == 1

    # Closed once: again is one line, exit 1, nothing written.
    before = retirement_rows()
    again = cmd("close_retirement_alarm", str(req.id), "--kind", STALE, "--by", "operator-a", "--reason", "twice")
    assert again.code == 1 and again.out == ""
    assert again.err.strip().splitlines() == [
        f"request {req.id}: no {STALE} alarm is open: nothing to close; nothing was recorded"
    ]
    assert retirement_rows() == before


def test_without_a_kind_the_one_open_alarm_a_person_closes_is_closed(hq, make_workspace) -> None:
    req = stale_in_process(hq, make_workspace)
    closed = retirement_close_alarm(actor=Actor.of(hq), request_id=req.id, reason=FOUND)
    assert closed.decision is not None and closed.resolved_at is not None
    assert (closed.kind, closed.decision.actor_label) == (STALE, "hq-alice")
    with pytest.raises(Refused) as refused:
        retirement_close_alarm(actor=Actor.of(hq), request_id=req.id, reason=FOUND)
    assert refused.value.message == (
        f"request {req.id}: no alarm that only a person closes (purge stale executor) is open: nothing to close; "
        "nothing was recorded"
    )


def test_someone_without_the_permission_or_a_reason_is_refused_and_nothing_is_written(hq, make_workspace, cmd) -> None:
    req = stale_in_process(hq, make_workspace)
    make_staff("hq-reader", "view_retirementrequest")
    before = retirement_rows()
    with pytest.raises(NotAllowed):
        retirement_close_alarm(actor=Actor.of(make_staff("hq-carol")), request_id=req.id, reason=FOUND)
    ran = cmd("close_retirement_alarm", str(req.id), "--by", "hq-reader", "--reason", FOUND)
    assert ran.code == 1 and ran.out == ""
    assert ran.err.strip().splitlines() == [
        "hq-reader is not allowed to resume retirement requests (only active staff holding "
        "retirements.resume_retirementrequest)"
    ]
    for reason in ("", "   "):
        with pytest.raises(BadInput):
            retirement_close_alarm(actor=Actor.of(hq), request_id=req.id, reason=reason)
        empty = cmd("close_retirement_alarm", str(req.id), "--by", "hq-alice", "--reason", reason)
        assert empty.code == 2 and empty.out == "" and len(empty.err.strip().splitlines()) == 1, empty
        assert "reason" in empty.err and "Traceback" not in empty.err
    missing = cmd("close_retirement_alarm", str(req.id), "--by", "hq-alice")
    assert missing.code != 0 and "--reason" in missing.err
    assert retirement_rows() == before
    assert Alarm.objects.get(request=req, kind=STALE).resolved_at is None


@pytest.mark.parametrize("kind", sorted(ANSWERED_BY_A_MOVE))
def test_an_alarm_a_move_answers_is_refused_naming_the_move(hq, make_workspace, cmd, kind) -> None:
    req = stale_in_process(hq, make_workspace)
    before = retirement_rows()
    ran = cmd("close_retirement_alarm", str(req.id), "--kind", kind, "--by", "hq-alice", "--reason", FOUND)
    assert ran.code == 1 and ran.out == ""
    assert ran.err.strip().splitlines() == [
        f"request {req.id}: a {kind} alarm closes with the move that answers it, {ANSWERED_BY_A_MOVE[kind]}, "
        "never by hand; nothing was recorded"
    ]
    assert retirement_rows() == before


def test_an_open_refused_purge_alarm_is_left_to_its_moves(hq, make_workspace, cmd) -> None:
    """A refused purge's alarm is open, and no alarm a person closes is: nothing is closed by hand."""
    req, job = executing(hq, make_workspace)
    hq.groups.clear()  # the requester lost authority: the boundary refuses
    assert "refused" in purge.run_purge(job.id, now=timezone.now())
    operator = make_staff("hq-bob", "resume_retirementrequest")
    before = retirement_rows()
    ran = cmd("close_retirement_alarm", str(req.id), "--kind", "purge_refused", "--by", operator.username,
              "--reason", "the requester is back")  # fmt: skip
    assert ran.code == 1 and ran.err.strip().splitlines() == [
        f"request {req.id}: a purge_refused alarm closes with the move that answers it, retry_purge or "
        "close_retirement, never by hand; nothing was recorded"
    ]
    bare = cmd("close_retirement_alarm", str(req.id), "--by", operator.username, "--reason", "the requester is back")
    assert bare.code == 1 and bare.err.strip().splitlines() == [
        f"request {req.id}: no alarm that only a person closes (purge stale executor) is open: nothing to close; "
        "nothing was recorded"
    ]
    assert retirement_rows() == before


def test_an_unknown_kind_or_case_is_one_line_exit_2(hq, make_workspace, cmd) -> None:
    req = stale_in_process(hq, make_workspace)
    before = retirement_rows()
    ran = cmd("close_retirement_alarm", str(req.id), "--kind", "everything", "--by", "hq-alice", "--reason", FOUND)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err.strip().splitlines() == [
        "'everything' is not a retirement alarm's kind: a person closes purge_stale_executor"
    ]
    nobody = cmd("close_retirement_alarm", "00000000-0000-0000-0000-000000000001", "--by", "hq-alice",
                 "--reason", FOUND)  # fmt: skip
    assert nobody.code == 2 and len(nobody.err.strip().splitlines()) == 1 and "Traceback" not in nobody.err
    no_token = cmd("close_retirement_alarm", str(req.id), "--by", "hq-alice", "--reason", FOUND, token=False)
    assert no_token.code == 1 and len(no_token.err.strip().splitlines()) == 1
    assert retirement_rows() == before


def test_a_close_behind_a_watcher_mid_step_is_one_line_at_once_and_writes_nothing(hq, make_workspace, cmd) -> None:
    """The staff lock wait (`store.locks.for_decision`): another connection holds the workspace
    and request rows; the close is refused after its 2-second wait, in one line, nothing written;
    once the lock is let go the same command closes the alarm."""
    req = stale_in_process(hq, make_workspace)
    before = retirement_rows()
    close = ("close_retirement_alarm", str(req.id), "--by", "hq-alice", "--reason", FOUND)
    ran, took = behind_a_watcher_mid_step(req, lambda: cmd(*close))
    assert ran.code == 1 and ran.out == "", ran
    assert ran.err.strip().splitlines() == [BUSY]
    assert 1.5 < took < 15, took  # its own 2-second wait, not the database's 30-second lock timeout
    assert retirement_rows() == before
    assert cmd(*close).code == 0
    assert Alarm.objects.get(request=req, kind=STALE).resolved_at is not None


def test_the_database_closes_it_only_with_a_persons_close_alarm_decision_on_its_case(hq, make_workspace) -> None:
    """Whatever writes to the table: resolved without a decision, with a system's decision, with
    another case's or another action's, it stays open; with the person's, it closes, once."""
    req = stale_in_process(hq, make_workspace)
    other = stale_in_process(hq, make_workspace, "acme-other")
    alarm = Alarm.objects.get(request=req, kind=STALE)
    purged = Decision.objects.get(request=req, action="purged")  # the system's, no actor
    own = retirement_close_alarm(actor=Actor.of(hq), request_id=other.id, reason=FOUND).decision
    assert own is not None
    held = Decision.objects.create(
        request=req, workspace=req.workspace, actor=hq, actor_label="hq-alice", action="hold",
        reason="a person, another action", created_at=timezone.now(),
    )  # fmt: skip
    for decision_id in (None, purged.id, own.id, held.id):
        refused = pytest.raises(IntegrityError, match="closed only by a person's close_alarm decision on its case")
        with refused, transaction.atomic(), connection.cursor() as cur:
            cur.execute(
                "UPDATE retirements_alarm SET resolved_at = now(), decision_id = %s WHERE id = %s",
                [decision_id, alarm.id],
            )
    assert Alarm.objects.get(id=alarm.id).resolved_at is None
    closed = retirement_close_alarm(actor=Actor.of(hq), request_id=req.id, reason=FOUND)
    assert closed.id == alarm.id and closed.decision is not None and closed.decision.action == "close_alarm"
    with pytest.raises(IntegrityError, match="never rewritten"), transaction.atomic(), connection.cursor() as cur:
        cur.execute("UPDATE retirements_alarm SET decision_id = %s WHERE id = %s", [held.id, alarm.id])
