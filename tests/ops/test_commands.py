"""Operator commands with no other test: demo_setup, embedded_db, setup_schedules, manage.py test."""

from __future__ import annotations

import subprocess
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django_q.models import Schedule

from core import clock
from deletions.models import DeletionRequest
from ops.schedules import MINUTES, SCHEDULES
from retirements.models import RetirementRequest, Workspace
from tests.conftest import ROOT, manage_argv, subprocess_env


@pytest.mark.django_db(transaction=True)  # the demo's killed worker is a real process
def test_demo_setup_prints_logins_seeds_cases_once_and_resets_passwords(cmd, monkeypatch) -> None:
    from django.contrib.auth.models import Group, Permission

    from ops.groups import ensure_groups

    ensure_groups(Group, Permission)
    monkeypatch.setenv("DEMO_PASSWORD", "first-pass-123")
    first = cmd("demo_setup")
    assert first.code == 0, first.err
    assert "Demo staff login: username=demo password=first-pass-123" in first.out
    assert (
        "operator-1 (operators), operator-2 (operators), approver-1 (approvers), approver-2 (approvers), "
        "support-1 (support (read-only)), auditor-1 (auditors)"
    ) in first.out
    assert "Demo cases created" in first.out
    statuses = dict(DeletionRequest.objects.values_list("target", "status"))
    assert statuses == {
        "demo:alice": "submitted",
        "demo:bob": "approved",
        "demo:carol": "completed",
        "demo:dave": "retry_wait",
        "demo:erin": "cancelled",
        "demo:frank": "needs_attention",
        "demo:grace": "running",  # its worker was killed after submitting: the lease runs out, the effect is unknown
        "demo:heidi": "needs_review",
        "manual:vendor-crm/judy@example.com": "needs_attention",  # its first stage waits for a person
    }
    for target in statuses:
        assert target in first.out  # the output says which case shows which state
    # The states last: dave's retry is due in more than 10 minutes; grace's stage was submitted.
    dave = DeletionRequest.objects.get(target="demo:dave")
    assert dave.retry_count == 6 and dave.next_attempt_at is not None
    assert dave.next_attempt_at > clock.now() + timedelta(minutes=10)
    grace = DeletionRequest.objects.get(target="demo:grace")
    assert grace.stages.get(is_current=True).submitted_at is not None and grace.lease_owner == "demo-lost-worker"
    assert DeletionRequest.objects.get(target="demo:frank").retry_count == 10
    assert set(Workspace.objects.values_list("lifecycle", flat=True)) == {
        "active",
        "disabled",
        "deletion_pending",
        "deleting",
        "deleted",
    }
    assert dict(RetirementRequest.objects.values_list("workspace__slug", "status")) == {
        "initech-old": "waiting",
        "globex-old": "held",
    }
    assert User.objects.get(username="approver-1").groups.get().name == "approvers"

    monkeypatch.setenv("DEMO_PASSWORD", "second-pass-456")
    again = cmd("demo_setup")
    assert again.code == 0 and "Demo cases created" not in again.out
    assert DeletionRequest.objects.count() == 9
    assert User.objects.get(username="demo").check_password("second-pass-456")


@pytest.mark.django_db
def test_demo_setup_refuses_production(cmd, settings) -> None:
    settings.PRODUCTION = True
    ran = cmd("demo_setup")
    assert ran.code == 1 and "refuses to run with DEPLOYMENT_ENV=production" in ran.err
    assert not User.objects.filter(username="demo").exists()


@pytest.mark.django_db
def test_setup_schedules_is_idempotent(cmd) -> None:
    Schedule.objects.all().delete()
    for _ in range(2):
        ran = cmd("setup_schedules")
        assert ran.code == 0
    assert sorted(Schedule.objects.values_list("name", "func")) == sorted(SCHEDULES.items())
    assert dict(Schedule.objects.values_list("name", "minutes")) == {name: MINUTES.get(name, 1) for name in SCHEDULES}
    assert set(MINUTES.values()) == {60, 1440}  # hourly ones, and the daily retention job


@pytest.mark.django_db
def test_setup_schedules_warns_when_it_recreates_a_deleted_schedule(cmd) -> None:
    name = next(iter(SCHEDULES))
    Schedule.objects.filter(name=name).delete()
    ran = cmd("setup_schedules")
    assert ran.code == 0 and f"warning: schedule {name!r} was missing; recreating it" in ran.err
    assert Schedule.objects.filter(name=name).exists()
    assert "warning" not in cmd("setup_schedules").err  # nothing missing: nothing to say


@pytest.mark.django_db
def test_embedded_db_status_and_repair(cmd, settings) -> None:
    db = settings.DATABASES["default"]
    if "EMBEDDED_DATADIR" not in db:
        ran = cmd("embedded_db", "status")
        assert ran.code == 2 and "DATABASE_URL is set" in ran.err
        return
    status = cmd("embedded_db", "status")
    assert status.code == 0 and status.out.strip().endswith(": running")
    repair = cmd("embedded_db", "repair")
    assert repair.code == 0 and repair.out.strip() == "nothing to repair"


@pytest.mark.django_db
def test_manage_py_test_runs_the_suite_through_pytest() -> None:
    proc = subprocess.run(
        manage_argv("test", "tests/deletions/test_policy.py"),
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "test_policy" not in proc.stderr


@pytest.mark.django_db
def test_manage_py_test_fails_when_a_test_fails(tmp_path) -> None:
    failing = tmp_path / "test_runner_probe.py"
    failing.write_text("def test_probe():\n    assert False\n")
    proc = subprocess.run(
        manage_argv("test", str(failing)), cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=240
    )
    assert proc.returncode != 0 and "1 failed" in proc.stdout


@pytest.mark.django_db
def test_demo_setup_keep_password_leaves_an_existing_login_alone(cmd, monkeypatch) -> None:
    monkeypatch.setenv("DEMO_PASSWORD", "original-pass-1")
    assert cmd("demo_setup", "--no-data").code == 0
    monkeypatch.setenv("DEMO_PASSWORD", "other-pass-2")
    kept = cmd("demo_setup", "--no-data", "--keep-password")
    assert kept.code == 0 and "password unchanged" in kept.out
    assert User.objects.get(username="demo").check_password("original-pass-1")
    assert not DeletionRequest.objects.exists()
