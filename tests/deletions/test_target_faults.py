"""Real faults between a worker and the target system (a stopped target database, a connection
killed during the target's COMMIT, a statement timeout there) leave the effect unknown, owned, with
a next check and an alarm; the next run settles it from the target's record, never by resending
blindly, and each effect lands once."""

from __future__ import annotations

import signal
from datetime import timedelta

import psutil
import pytest
import time_machine
from django.db import connections

from deletions.models import DeletionAlarm, DeletionRequest
from tests.conftest import submit_and_approve
from tests.deletions.helpers import TargetStopped, effects, start_worker, target_server
from tests.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def unknown_and_owned(request_id) -> DeletionRequest:
    case = DeletionRequest.objects.get(id=request_id)
    row = case.stages.get(is_current=True)
    assert case.status == "retry_wait" and row.submitted_at is not None and row.status != "completed"
    assert case.owner and case.next_check_at is not None
    assert case.open_question.startswith(f"did operation {row.operation_id}"), case.open_question
    alarm = DeletionAlarm.objects.get(request_id=request_id, resolved_at__isnull=True)
    assert alarm.kind == "effect_unknown"
    return case


def settle(cmd, case: DeletionRequest) -> DeletionRequest:
    """The next run, when the retry is due: looks the operation up, then goes on."""
    assert case.next_attempt_at is not None
    with time_machine.travel(case.next_attempt_at + timedelta(seconds=1), tick=True):
        ran = cmd("run_deletion", str(case.id), "--executor-id", "worker-b")
    assert ran.code == 0, ran.err
    done = DeletionRequest.objects.get(id=case.id)
    assert done.status == "completed"
    assert not DeletionAlarm.objects.filter(request_id=case.id, resolved_at__isnull=True).exists()
    ops = effects(case.id)
    assert len(ops) == len({op for op, _, _ in ops}) == 6
    return done


def test_the_target_stopped_between_grant_and_effect_leaves_it_unknown_then_settles(cmd, observe) -> None:
    req = submit_and_approve("demo:stopped")
    worker = start_worker(req.id, "--executor-id", "worker-a", PAUSE_AT="after-grant")
    proc = psutil.Process(worker.pid)
    wait_for(lambda: proc.status() == psutil.STATUS_STOPPED, what="worker-a paused holding its grant")
    with TargetStopped():
        worker.send_signal(signal.SIGCONT)
        _, err = worker.communicate(timeout=120)
        assert worker.returncode == 1, err
        case = unknown_and_owned(req.id)
        assert case.next_attempt_at is not None and "did not answer" in (case.last_error or ""), case.last_error
        # While the target takes no connections, a run claims nothing and says why in one line.
        with time_machine.travel(case.next_attempt_at + timedelta(seconds=1), tick=True):
            blocked = cmd("run_deletion", str(req.id), "--executor-id", "worker-b")
        assert blocked.code == 1 and "nothing was claimed or sent" in blocked.err, blocked.err
        assert DeletionRequest.objects.get(id=req.id).lease_generation == case.lease_generation
    done = settle(cmd, case)
    observe(
        f"target stopped as worker-a sent: exit {worker.returncode}, effect unknown with owner {case.owner}, "
        f"next check and alarm; a run during the outage refused in one line; after the restart: "
        f"{done.status}, {len(effects(req.id))} effects, each once"
    )


SLOW_COMMIT = """
CREATE OR REPLACE FUNCTION test_slow_commit() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN PERFORM pg_sleep(60); RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER test_slow_commit AFTER INSERT ON receiver.receiver_operations
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_slow_commit();
"""


def test_a_connection_killed_during_the_targets_commit_leaves_it_unknown_then_settles(cmd, observe) -> None:
    req = submit_and_approve("demo:killed-commit")
    name = connections["target"].settings_dict["NAME"]
    with connections["target"].cursor() as cur:
        cur.execute(SLOW_COMMIT)
    try:
        worker = start_worker(req.id, "--executor-id", "worker-a")
        admin = target_server()
        committing = wait_for(
            lambda: admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND wait_event = 'PgSleep'", [name]
            ).fetchone(),
            what="the worker's target transaction inside its COMMIT",
        )
        admin.execute("SELECT pg_terminate_backend(%s)", [committing[0]])
        admin.close()
        _, err = worker.communicate(timeout=120)
    finally:
        with connections["target"].cursor() as cur:
            cur.execute("DROP TRIGGER IF EXISTS test_slow_commit ON receiver.receiver_operations")
    assert worker.returncode == 1, err
    case = unknown_and_owned(req.id)
    assert effects(req.id) == []  # the COMMIT did not complete: nothing is recorded there
    done = settle(cmd, case)
    observe(
        f"the target backend killed inside COMMIT: effect unknown, owner {case.owner}; the next run found no record "
        f"past the submission and sent it again: {done.status}, {len(effects(req.id))} effects, each once"
    )


def test_a_statement_timeout_at_the_target_is_nothing_changed_retried_without_an_alarm_then_settles(
    cmd, observe
) -> None:
    """The receiver's transaction rolled back on its statement timeout: it answers "nothing changed, retry"
    (409), so the attempt is a plain failure retried with the normal backoff, with no effect in question,
    no owner and no alarm; the retry looks the operation up (it was marked submitted), finds no record past
    the submission and sends it again, once (issue 50, item 6)."""
    import psycopg

    from core.store import connection_url

    req = submit_and_approve("demo:busy")
    with psycopg.connect(connection_url("target")) as holder:  # an application holds the person's row
        holder.execute("SELECT id FROM people WHERE handle = %s FOR UPDATE", ["busy"])
        worker = start_worker(req.id, "--executor-id", "worker-a", RECEIVER_STATEMENT_TIMEOUT_MS="1000")
        _, err = worker.communicate(timeout=120)
        holder.rollback()
    assert worker.returncode == 1, err
    case = DeletionRequest.objects.get(id=req.id)
    assert case.status == "retry_wait" and case.open_question == "" and case.owner == "system", case.open_question
    said = case.last_error or ""
    assert said.startswith("nothing changed at demo target system at ") and "(statement_timeout)" in said, said
    assert "canceling statement due to statement timeout" in said and "; retried at " in said, said
    assert not DeletionAlarm.objects.filter(request_id=req.id).exists()
    assert effects(req.id) == []
    done = settle(cmd, case)
    observe(
        f"a statement at the target cancelled by its 1 s timeout: nothing changed, retried without an alarm "
        f"(owner {case.owner}); then {done.status}, {len(effects(req.id))} effects, each once"
    )


def test_a_proposal_says_when_the_target_cannot_be_read_now() -> None:
    from core.authority import named
    from deletions import proposal
    from deletions.services import deletion_submit

    req = deletion_submit(actor=named("operator-a"), target="demo:unreadable-preview")
    with TargetStopped():
        shown = proposal.of_request(req)
    assert shown.source.startswith("not readable now: demo target system at http://"), shown.source
    assert "did not answer preview" in shown.source and shown.unreadable in shown.source
    assert {c.name for c in shown.communities} == {"(the target system cannot be read now)"}
