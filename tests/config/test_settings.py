"""Production settings: refuse to start without a secret, pass `check --deploy`."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

GOOD_KEY = "k" * 30 + "Z9-x" * 10  # 70 characters, not one repeated


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
    proc = run("check", DEPLOYMENT_ENV="production", DJANGO_SECRET_KEY=GOOD_KEY, ALLOWED_HOSTS="backoffice.example")
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
        DJANGO_SECRET_KEY="k" * 30 + "Z9-x" * 10,
        ALLOWED_HOSTS="backoffice.example",
        DATABASE_URL="postgresql://u@db.invalid/x",
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "json", proc.stderr
    del env["DEPLOYMENT_ENV"]
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "plain", proc.stderr


PROD = {"DEPLOYMENT_ENV": "production", "DATABASE_URL": "postgresql://u@db.invalid/x", "REDIS_URL": "redis://r.invalid"}


def test_production_refuses_a_weak_secret_key() -> None:
    for weak in ("x", "x" * 60, "development-only-insecure-key-never-used-in-production"):
        proc = run("check", DJANGO_SECRET_KEY=weak, ALLOWED_HOSTS="backoffice.example", **PROD)
        assert proc.returncode != 0 and "DJANGO_SECRET_KEY is too weak for production" in proc.stderr, weak


def test_production_refuses_empty_allowed_hosts_and_debug() -> None:
    proc = run("check", DJANGO_SECRET_KEY=GOOD_KEY, ALLOWED_HOSTS=" , ", **PROD)
    assert proc.returncode != 0 and "ALLOWED_HOSTS must name the site's host names" in proc.stderr
    proc = run("check", DJANGO_SECRET_KEY=GOOD_KEY, ALLOWED_HOSTS="backoffice.example", DJANGO_DEBUG="1", **PROD)
    assert proc.returncode != 0 and "DJANGO_DEBUG=1 is refused" in proc.stderr


def test_healthz_answers_a_probe_by_address_over_plain_http(client, settings, db) -> None:
    """Production settings: SSL redirect on, only the site's host allowed; a probe still gets 200."""
    settings.SECURE_SSL_REDIRECT = True
    settings.ALLOWED_HOSTS = ["backoffice.example"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")  # as production sets it
    probe = client.get("/healthz", HTTP_HOST="10.0.0.5:8000")
    assert probe.status_code == 200 and probe.json() == {"status": "ok"}
    assert client.get("/admin/", HTTP_HOST="10.0.0.5:8000").status_code == 400  # everything else is host-checked
    assert client.get("/admin/", HTTP_HOST="backoffice.example").status_code == 301  # and redirected to https
    secure = client.get("/admin/login/", HTTP_HOST="backoffice.example", HTTP_X_FORWARDED_PROTO="https")
    assert secure.status_code == 200  # the proxy's header says the client used https


def test_a_500_is_logged_as_json_with_its_traceback_and_request_id(client, settings, db, capsys) -> None:
    """With DEBUG off, an unhandled error in a view is one JSON line on the console: level,
    logger django.request, the traceback, and the id the response carried."""
    import json
    import logging.config

    from django.test import Client

    logging.config.dictConfig(
        {**settings.LOGGING, "handlers": {"console": {**settings.LOGGING["handlers"]["console"], "formatter": "json"}}}
    )
    settings.DEBUG = False
    settings.ROOT_URLCONF = "tests.config.failing_urls"
    response = Client(raise_request_exception=False).get("/boom", HTTP_X_REQUEST_ID="req-42")
    assert response.status_code == 500 and response["X-Request-ID"] == "req-42"
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    error = next(line for line in lines if line.get("logger") == "django.request")
    assert error["level"] == "ERROR" and error["http_request_id"] == "req-42"
    assert "ZeroDivisionError" in error["exc"] and "Traceback" in error["exc"]


def test_a_request_id_from_the_proxy_is_kept_only_when_it_is_a_plain_token(client, db) -> None:
    assert client.get("/healthz", HTTP_X_REQUEST_ID="abc-123")["X-Request-ID"] == "abc-123"
    forged = client.get("/healthz", HTTP_X_REQUEST_ID="bad id\r\ninjected")["X-Request-ID"]
    assert forged != "bad id\r\ninjected" and len(forged) == 32 and forged.isalnum()  # a fresh one instead


def test_production_refuses_test_machinery_in_one_line() -> None:
    for name in ("CRASH_AT", "PAUSE_AT"):
        proc = run(
            "check", DJANGO_SECRET_KEY=GOOD_KEY, ALLOWED_HOSTS="backoffice.example", **{name: "after-claim"}, **PROD
        )
        assert proc.returncode != 0, proc.stdout
        last = proc.stderr.strip().splitlines()[-1]
        assert last.endswith(f"{name} is test machinery and is refused when DEPLOYMENT_ENV=production; unset it"), last


def test_crash_points_are_inert_in_production() -> None:
    """Set after start-up (the settings refuse it at start), a crash point does nothing in
    production; the same call in development kills the process."""
    script = (
        "import django, sys; django.setup(); from django.conf import settings;"
        " settings.PRODUCTION = sys.argv[1] == 'production';"
        " from core.crashpoints import crash_point; crash_point('after-claim'); print('alive')"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings_test", "CRASH_AT": "after-claim"}
    outcomes = {}
    for mode in ("production", "development"):
        proc = subprocess.run(
            [sys.executable, "-c", script, mode], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        outcomes[mode] = (proc.returncode, proc.stdout.strip())
    assert outcomes == {"production": (0, "alive"), "development": (-9, "")}, outcomes


def test_every_refused_setting_is_one_line_from_manage_and_from_the_wsgi_server() -> None:
    cases = [
        {"DEPLOYMENT_ENV": "staging"},
        {**PROD, "DJANGO_SECRET_KEY": "x", "ALLOWED_HOSTS": "backoffice.example"},
        {**PROD, "DJANGO_SECRET_KEY": GOOD_KEY, "ALLOWED_HOSTS": ".example"},
        {**PROD, "DJANGO_SECRET_KEY": GOOD_KEY, "ALLOWED_HOSTS": "backoffice.example", "DJANGO_DEBUG": "1"},
        {"DATABASE_APP_ROLE": "Robert'); DROP"},
    ]
    for env in cases:
        proc = run("check", **env)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("configuration refused: "), (
            env,
            proc.stderr[-800:],
        )
        base = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SECRET_KEY", "DATABASE_URL")}
        wsgi = subprocess.run(
            [sys.executable, "-c", "import config.wsgi"],
            cwd=ROOT, env={**base, "DJANGO_SETTINGS_MODULE": "config.settings", **env},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert wsgi.returncode == 3 and wsgi.stderr.strip() == lines[0], (env, wsgi.stderr[-800:])
