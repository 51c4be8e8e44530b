"""Prometheus metrics: a scrape after real runs shows the counters moved."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import time_machine
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from core import clock
from core.authority import named
from deletions import worker
from deletions.handlers import RunOptions
from deletions.services import deletion_revoke_approval
from ops.health import beat
from tests.conftest import submit_and_approve
from tests.support import clone_rows

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "metrics-token-for-tests-0123456789"


def scrape(client: Client, token: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """As Prometheus reaches an instance: by address, with the bearer token."""
    response = client.get("/metrics", headers={"Host": "10.0.0.5:9100", "Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.content
    out = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_a_scrape_after_a_run_shows_outcomes_durations_states_and_refusals(settings, observe) -> None:
    settings.METRICS_TOKEN = TOKEN
    client = Client()
    before = scrape(client, TOKEN)
    assert before[("backoffice_deletion_requests", (("state", "completed"),))] == 0

    done = submit_and_approve("demo:metrics-a")
    worker.run(done.id, executor_id="w1", options=RunOptions(fail_stage="purge_db"))  # gate, then a failure
    with time_machine.travel(clock.now() + timedelta(seconds=31), tick=False):
        worker.run(done.id, executor_id="w1")  # the rest
    refused = submit_and_approve("demo:metrics-b")
    worker.run(refused.id, executor_id="w2", next_step=True)
    deletion_revoke_approval(actor=named("operator-b"), request_id=refused.id, reason="reopened")
    worker.run(refused.id, executor_id="w2")  # the receiver refuses the next stage
    beat(clock.now())

    after = scrape(client, TOKEN)
    assert after[("backoffice_stage_attempts_total", (("outcome", "failed"), ("stage", "purge_db")))] == 1
    assert after[("backoffice_stage_attempts_total", (("outcome", "completed"), ("stage", "gate_user")))] == 2
    assert after[("backoffice_stage_attempts_total", (("outcome", "refused"), ("stage", "purge_db")))] == 1
    assert after[("backoffice_deletion_requests", (("state", "completed"),))] == 1
    assert after[("backoffice_deletion_requests", (("state", "needs_review"),))] == 1
    completed = after[("backoffice_stage_duration_seconds_count", ())]
    assert completed >= 6 and after[("backoffice_stage_duration_seconds_bucket", (("le", "+Inf"),))] == completed
    assert after[("backoffice_boundary_refusals_total", (("workflow", "deletion"),))] == 1
    assert 0 <= after[("backoffice_cluster_heartbeat_age_seconds", ())] < 5
    assert after[("backoffice_stalled_watchers", ())] == 0
    # The health split, as `manage.py health` says it: a refusal of a withdrawn approval is the
    # system working (no alarm), and a case back in review is no work of the needs-attention kind.
    assert after[("backoffice_healthy", ())] == 1
    assert after[("backoffice_health_check_ok", (("check", "refused_at_target"),))] == 1
    assert after[("backoffice_health_check_ok", (("check", "cluster"),))] == 1
    assert after[("backoffice_work_waiting", (("kind", "needs_attention"),))] == 0
    # Deadlines: the open one (back in review) is due in a month, none passed yet.
    assert after[("backoffice_deletion_deadlines", (("when", "passed"),))] == 0
    assert after[("backoffice_deletion_deadlines", (("when", "within_warning"),))] == 0
    with time_machine.travel(clock.now() + timedelta(days=40), tick=False):
        late = scrape(client, TOKEN)
    assert late[("backoffice_deletion_deadlines", (("when", "passed"),))] == 1
    assert late[("backoffice_work_waiting", (("kind", "deadlines_passed"),))] == 1  # work, not a fault
    assert late[("backoffice_healthy", ())] == 0  # the fault: no cluster has beaten for 40 days
    assert late[("backoffice_health_check_ok", (("check", "cluster"),))] == 0
    assert late[("backoffice_health_check_ok", (("check", "stage_workers"),))] == 1
    assert late[("backoffice_work_oldest_seconds", (("kind", "deadlines_passed"),))] >= 9 * 86400
    observe(
        "scrape after two runs: "
        + ", ".join(f"{name}{dict(labels)}={value:g}" for (name, labels), value in sorted(after.items()))
    )


def test_metrics_need_the_token(settings) -> None:
    client = Client()
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 404  # off without a token
    settings.METRICS_TOKEN = TOKEN
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401


def _copies(request_id: uuid.UUID, n: int, status: str) -> None:
    """n SQL copies of a request (new ids and targets, the given state), counted by the
    database's own triggers."""
    made = {"id": "gen_random_uuid()", "target": "t.target || '-' || g", "status": "%s"}
    clone_rows("entity_deletion_requests", "t.id = %s", n, made, [status, request_id])


def test_a_scrape_asks_the_same_few_queries_whatever_the_tables_hold(settings, observe) -> None:
    """The counts come from the tallies the database keeps, not from counting the tables: 2,000
    more requests (written by SQL, not by our services) are counted, and the scrape's queries
    stay the same in number."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from deletions.models import DeletionRequest

    settings.METRICS_TOKEN = TOKEN
    client = Client()
    template = submit_and_approve("demo:metrics-many")
    with CaptureQueriesContext(connection) as few:
        small = scrape(client, TOKEN)
    _copies(template.id, 2000, "completed")
    _copies(template.id, 30, "needs_attention")
    with CaptureQueriesContext(connection) as many:
        large = scrape(client, TOKEN)
    # The tallies, the cases in flight, and the health report's checks and work (`ops.health`).
    assert len(many) == len(few) <= 35, [q["sql"] for q in many.captured_queries]
    state = "backoffice_deletion_requests"
    assert large[(state, (("state", "completed"),))] == small[(state, (("state", "completed"),))] + 2000
    assert large[(state, (("state", "needs_attention"),))] == 30
    for status in ("completed", "needs_attention", "approved"):  # the tallies agree with the table
        assert large[(state, (("state", status),))] == DeletionRequest.objects.filter(status=status).count()
    scanned = [q["sql"] for q in many.captured_queries if "COUNT(" in q["sql"].upper() and "GROUP BY" in q["sql"]]
    assert not scanned, scanned  # no count of a table by state
    observe(f"a scrape asks {len(many)} queries at {DeletionRequest.objects.count():,} requests as at 1")


def test_two_scrapes_at_once_count_each_event_once(settings) -> None:
    """Folding the events is one statement: two scrapes in threads at the same moment, then a
    third, and every request is counted once."""
    from deletions.models import DeletionRequest
    from tests.support import race

    settings.METRICS_TOKEN = TOKEN
    template = submit_and_approve("demo:metrics-fold")
    _copies(template.id, 500, "completed")
    results = race(2, lambda i: scrape(Client(), TOKEN))
    assert not [r for r in results if isinstance(r, Exception)], results
    after = scrape(Client(), TOKEN)
    completed = DeletionRequest.objects.filter(status="completed").count()
    assert after[("backoffice_deletion_requests", (("state", "completed"),))] == completed == 500


def test_the_tallies_the_triggers_keep_equal_a_count_of_the_tables(settings) -> None:
    """After real runs (a request completed after a failed stage was retried, one still open), the tallies kept as
    things happened equal the tallies counted again from the tables."""
    from ops.metrics import read_tallies, recount_tallies

    done = submit_and_approve("demo:metrics-recount")
    worker.run(done.id, executor_id="w1", options=RunOptions(fail_stage="purge_db"))
    with time_machine.travel(clock.now() + timedelta(seconds=31), tick=False):
        worker.run(done.id, executor_id="w1")
    submit_and_approve("demo:metrics-recount-open")
    kept, _ = read_tallies()
    recount_tallies()
    counted, _ = read_tallies()

    def nonzero(tallies: dict) -> dict:
        return {(m, label): n for m, labels in tallies.items() for label, (n, _) in labels.items() if n}

    assert nonzero(kept) == nonzero(counted)
    assert nonzero(kept)[("deletion_requests", "completed")] == 1
    from deletions.models import StageAttempt

    completed = StageAttempt.objects.filter(outcome="completed").count()
    assert completed >= 5 and sum(n for n, _ in kept["stage_duration"].values()) == completed
