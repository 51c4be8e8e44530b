"""Prometheus metrics: a scrape after real runs shows the counters moved."""

from __future__ import annotations

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
    # Deadlines: the open one (back in review) is due in a month, none passed yet.
    assert after[("backoffice_deletion_deadlines", (("when", "passed"),))] == 0
    assert after[("backoffice_deletion_deadlines", (("when", "within_warning"),))] == 0
    with time_machine.travel(clock.now() + timedelta(days=40), tick=False):
        late = scrape(client, TOKEN)
    assert late[("backoffice_deletion_deadlines", (("when", "passed"),))] == 1
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
