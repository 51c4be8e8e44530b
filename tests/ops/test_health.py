"""`manage.py health` and /healthz turn red for stalled work, needs_attention and a lost database."""

from __future__ import annotations

import json
import subprocess
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone

from core.authority import Actor, named
from deletions.models import DeletionRequest, Status
from deletions.services import deletion_cancel, deletion_resume
from ops.models import ClusterHeartbeat
from retirements.services import retirement_request, retirement_resume
from tests.conftest import ROOT, manage_argv, submit_and_approve, subprocess_env
from tests.retirements.conftest import ALL_PERMS, make_staff
from tests.support import force

pytestmark = pytest.mark.django_db


def health(cmd) -> tuple[int, dict]:
    ran = cmd("health", "--json")
    return ran.code, json.loads(ran.out)


def beat() -> None:
    ClusterHeartbeat.objects.update_or_create(name="test-cluster", defaults={"seen_at": timezone.now()})


def test_green_when_everything_is_fine(cmd) -> None:
    beat()
    code, data = health(cmd)
    assert code == 0 and data["status"] == "green"
    assert set(data["checks"]) == {
        "database",
        "cluster",
        "stalled_watchers",
        "failing_watchers",
        "integrity_faults",
        "evidence",
        "failed_notices",
        "refused_at_target",
        "withdrawals_unacknowledged",
        "stage_workers",
        "purges_refused",
        "notifications_failed",
        "unnamed_cases",
        "receivers",
    }
    assert data["checks"]["stage_workers"] == {"ok": True, "busy": 0, "waiting": 0, "detail": "no case waits"}
    assert data["work"] == {
        "needs_attention": {"count": 0, "detail": "none"},
        "deadlines_passed": {"count": 0, "detail": "none"},
        "aged_retirements": {"count": 0, "detail": "none"},
    }


def test_red_when_a_case_waits_half_an_hour_for_a_free_worker(cmd) -> None:
    """No worker took an approved case (every stage worker busy, or none running): queued, never
    overdue on its page, and red here once it has waited 30 minutes."""
    beat()
    req = submit_and_approve()
    with time_machine.travel(timezone.now() + timedelta(minutes=29), tick=False):
        beat()
        code, data = health(cmd)
        assert code == 0 and data["checks"]["stage_workers"]["waiting"] == 1
    with time_machine.travel(timezone.now() + timedelta(minutes=31), tick=False):
        beat()
        code, data = health(cmd)
        assert code == 1
        assert data["checks"]["stage_workers"] == {
            "ok": False, "busy": 0, "waiting": 1, "detail": "the longest wait for a free worker is 1860 s",
        }  # fmt: skip
        deletion_cancel(request_id=req.id, actor=named("operator-c"), reason="no worker for half an hour")
        assert health(cmd)[0] == 0


def test_red_without_a_recent_cluster_heartbeat(cmd) -> None:
    code, data = health(cmd)
    assert code == 1 and data["checks"]["cluster"] == {
        "ok": False, "age_s": None, "detail": "no cluster heartbeat yet",
    }  # fmt: skip
    ClusterHeartbeat.objects.create(name="old", seen_at=timezone.now() - timedelta(minutes=4))
    assert health(cmd)[0] == 1
    beat()
    assert health(cmd)[0] == 0


def test_stopped_workers_turn_it_red_within_two_minutes_of_their_last_beat(cmd) -> None:
    """A live cluster beats at most 90 s apart (measured under saturation in
    tests/workers/test_saturation.py); with none since, health is red before two minutes pass."""
    beat()
    last = ClusterHeartbeat.objects.get(name="test-cluster").seen_at
    with time_machine.travel(last + timedelta(seconds=100), tick=False):
        code, data = health(cmd)
        assert code == 0 and data["checks"]["cluster"]["age_s"] == 100
    with time_machine.travel(last + timedelta(seconds=111), tick=False):
        code, data = health(cmd)
        assert code == 1 and data["checks"]["cluster"] == {
            "ok": False, "age_s": 111, "detail": "last heartbeat 111 s ago",
        }  # fmt: skip


def test_a_case_needing_a_person_is_work_waiting_not_a_red_system(cmd) -> None:
    beat()
    req = submit_and_approve()
    force(DeletionRequest.objects.filter(id=req.id), status=Status.NEEDS_ATTENTION)
    code, data = health(cmd)
    assert code == 0 and data["status"] == "green"
    assert data["work"]["needs_attention"]["count"] == 1 and data["work"]["needs_attention"]["oldest_s"] >= 0
    text = cmd("health")
    assert "health: GREEN" in text.out and "work waiting for people" in text.out
    assert "  needs_attention: 1, the oldest since " in text.out
    deletion_resume(request_id=req.id, actor=named("operator-c"))
    assert health(cmd)[1]["work"]["needs_attention"] == {"count": 0, "detail": "none"}


def test_red_for_a_stalled_watcher_and_green_after_resume(cmd) -> None:
    from core import clock
    from retirements.models import Workspace

    staff: User = make_staff("hq-alice", *ALL_PERMS)
    Workspace.objects.create(
        slug="ws", name="W", lifecycle="disabled", activated_at=clock.now(), created_at=clock.now()
    )
    req = retirement_request(actor=Actor.of(staff), slug="ws", reason="r", confirmation="ws")
    later = timezone.now() + timedelta(minutes=20)
    with time_machine.travel(later, tick=False):
        beat()
        code, data = health(cmd)
        assert code == 1 and data["checks"]["stalled_watchers"] == {"ok": False, "count": 1}
        retirement_resume(actor=Actor.of(staff), request_id=req.id, reason="watcher stalled")
        assert health(cmd)[0] == 0


def test_healthz_serves_the_same_report_without_personal_data(client, settings) -> None:
    """The full report for the metrics token (and staff); a load balancer gets the status only."""
    beat()
    submit_and_approve()
    settings.METRICS_TOKEN = "t" * 40
    response = client.get("/healthz", HTTP_AUTHORIZATION="Bearer " + "t" * 40)
    assert response.status_code == 200 and response.json()["status"] == "green"
    assert "operator" not in response.content.decode() and "demo:" not in response.content.decode()
    assert client.get("/healthz", HTTP_AUTHORIZATION="t" * 40).json() == {"status": "ok"}  # no "Bearer ": public


def test_healthz_tells_the_public_only_its_status_and_staff_everything(client) -> None:
    from django.contrib.auth.models import User

    beat()
    public = client.get("/healthz", HTTP_HOST="10.0.0.5:8000")
    assert public.status_code == 200 and public.json() == {"status": "ok"}
    client.force_login(User.objects.create_user("ops-1", is_staff=True))
    full = client.get("/healthz").json()
    assert full["status"] == "green" and "cluster" in full["checks"]
    client.force_login(User.objects.create_user("customer-1", is_staff=False))
    assert client.get("/healthz").json() == {"status": "ok"}


@pytest.mark.django_db(transaction=True)
def test_red_when_the_database_is_unreachable_and_green_when_it_is_back() -> None:
    beat()

    def run(url: str | None) -> subprocess.CompletedProcess[str]:
        env = subprocess_env(**({"DATABASE_URL": url} if url else {}))
        return subprocess.run(manage_argv("health"), env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)

    down = run("postgresql://postgres@127.0.0.1:1/nowhere")
    assert down.returncode == 1
    assert "FAIL database: unreachable" in down.stdout and "Traceback" not in down.stderr
    assert "; to fix: start the database (`manage.py embedded_db start`" in down.stdout
    back = run(None)
    assert back.returncode == 0, back.stdout + back.stderr
    assert "health: GREEN" in back.stdout


def test_a_deletion_open_past_its_legal_deadline_is_work_waiting_with_its_age() -> None:
    from datetime import timedelta

    import time_machine

    from core import clock
    from core.authority import named
    from deletions.services import deletion_submit
    from ops.health import report

    deletion_submit(target="demo:overdue", actor=named("operator-a"), received_at=clock.now() - timedelta(days=20))
    assert report(clock.now())["work"]["deadlines_passed"] == {"count": 0, "detail": "none"}
    with time_machine.travel(clock.now() + timedelta(days=12), tick=False):
        data = report(clock.now())
    passed = data["work"]["deadlines_passed"]
    assert passed["count"] == 1 and passed["oldest_s"] >= 24 * 3600 and "deadlines_passed" not in data["checks"]


def test_red_when_a_case_waits_on_a_rota_that_names_nobody(settings) -> None:
    """A group is never the answer to who holds a case: a rota with nobody who may hold it, or a
    case whose state moved minutes ago with no custody pass since, is a fault of the system."""
    from core import clock
    from deletions.services import deletion_name_by_rota, deletion_submit
    from ops.health import report

    req = deletion_submit(target="demo:unnamed", actor=named("operator-a"))
    assert report(clock.now())["checks"]["unnamed_cases"] == {"ok": True, "count": 0}  # named at submission
    settings.CUSTODY_ROTAS = {**settings.CUSTODY_ROTAS, "operators on call": {"people": ["nobody-here"]}}
    force(
        DeletionRequest.objects.filter(id=req.id),
        status=Status.NEEDS_ATTENTION, open_question="failed 10 times", assignee=None, backup=None,
        owner="operators on call",
    )  # fmt: skip
    assert report(clock.now())["checks"]["unnamed_cases"] == {"ok": True, "count": 0}  # the pass has a minute
    with time_machine.travel(clock.now() + timedelta(minutes=4), tick=False):
        assert report(clock.now())["checks"]["unnamed_cases"] == {"ok": False, "count": 1}  # no pass ran
        assert deletion_name_by_rota() == 0  # the pass ran, and its rota had nobody to name
        data = report(clock.now())
        assert data["checks"]["unnamed_cases"] == {"ok": False, "count": 1} and data["status"] == "red"
    row = DeletionRequest.objects.get(id=req.id)
    # Nobody is named rather than a person without a backup: the naming stays the old state's.
    assert row.assigned_for == "submitted:approvers" and row.assignee_id is None


def test_every_check_names_its_remedy_when_red_and_only_then(cmd) -> None:
    """Each check has one remedy (ops.health.REMEDIES); a red check carries it on every face, a
    green one does not: `health` ends the FAIL line with it, the JSON report gives it."""
    from ops.health import REMEDIES

    code, data = health(cmd)  # no cluster heartbeat yet: red on `cluster` alone
    assert code == 1 and set(data["checks"]) == set(REMEDIES)
    red = {name for name, check in data["checks"].items() if not check["ok"]}
    assert red == {"cluster"}
    assert data["remedies"] == {"cluster": REMEDIES["cluster"]}
    line = [x for x in cmd("health").out.splitlines() if "FAIL" in x]
    assert line == [f"  FAIL cluster: no cluster heartbeat yet; to fix: {REMEDIES['cluster']}"]
    assert "run_workers" in REMEDIES["cluster"]
