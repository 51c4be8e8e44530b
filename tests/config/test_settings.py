"""Production settings: refuse to start without a secret, pass `check --deploy`."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    drop = ("DJANGO_SECRET_KEY", "DATABASE_URL", "EMBEDDED_PGDATA", "DJANGO_ALLOW_ASYNC_UNSAFE")
    base = {k: v for k, v in os.environ.items() if k not in drop}
    base.update(DJANGO_SETTINGS_MODULE="config.settings", **env)
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=base, capture_output=True, text=True, timeout=60
    )


def test_production_refuses_to_start_without_a_secret_key() -> None:
    proc = run("check", DEPLOYMENT_ENV="production", DATABASE_URL="postgresql://u@db.invalid/x")
    assert proc.returncode != 0
    assert "DJANGO_SECRET_KEY must be set when DEPLOYMENT_ENV=production" in proc.stderr


def test_production_refuses_the_embedded_database() -> None:
    proc = run("check", DEPLOYMENT_ENV="production", DJANGO_SECRET_KEY="x" * 60)
    assert proc.returncode != 0 and "DATABASE_URL must be set when DEPLOYMENT_ENV=production" in proc.stderr


def test_production_passes_check_deploy() -> None:
    proc = run(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DEPLOYMENT_ENV="production",
        DJANGO_SECRET_KEY="k" * 30 + "Z9-x" * 10,
        ALLOWED_HOSTS="backoffice.example",
        DATABASE_URL="postgresql://u@db.invalid/x",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "System check identified no issues" in proc.stdout


def test_unknown_deployment_env_is_refused() -> None:
    proc = run("check", DEPLOYMENT_ENV="staging")
    assert proc.returncode != 0 and "DEPLOYMENT_ENV must be development or production" in proc.stderr


def test_production_logs_one_json_object_per_line() -> None:
    code = (
        "import django, logging; django.setup();"
        "from django.conf import settings;"
        "print(settings.LOGGING['handlers']['console']['formatter'])"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DEPLOYMENT_ENV="production",
        DJANGO_SECRET_KEY="s" * 60,
        DATABASE_URL="postgresql://u@db.invalid/x",
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "json", proc.stderr
    del env["DEPLOYMENT_ENV"]
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "plain", proc.stderr
