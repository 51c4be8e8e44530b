"""The production web server, as `make serve` starts it: gunicorn with DEPLOYMENT_ENV=production
against the machine's standalone PostgreSQL and Redis, behind a TLS-terminating proxy."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import pytest

from ops.netcut import free_port
from tests.conftest import ROOT, manage_argv

PG = os.environ.get("CI_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
HOST = "backoffice.example"
KEY = "k" * 30 + "Z9-x" * 10


def _standalone_or_skip() -> None:
    import psycopg

    try:
        psycopg.connect(PG, connect_timeout=3).close()
        socket.create_connection(("127.0.0.1", 6379), timeout=3).close()
    except Exception as exc:
        if os.environ.get("CI"):
            raise AssertionError(f"CI machines run PostgreSQL and Redis locally; they did not answer: {exc}") from exc
        pytest.skip(f"no standalone PostgreSQL and Redis here ({exc}); CI has both")


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def fetch(url: str, headers: dict[str, str], data: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with opener.open(request, timeout=60) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    _standalone_or_skip()
    import psycopg

    name = f"serve_test_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBEDDED_PG", "DJANGO_ALLOW_ASYNC"))}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DEPLOYMENT_ENV="production",
        DJANGO_SECRET_KEY=KEY,
        ALLOWED_HOSTS=f"{HOST},127.0.0.1",
        DATABASE_URL=PG.rsplit("/", 1)[0] + f"/{name}",
        REDIS_URL="redis://127.0.0.1:6379/14",
        STATIC_ROOT=str(tmp_path / "static"),
        BIND=f"127.0.0.1:{port}",
        DJANGO_SUPERUSER_PASSWORD="served-pw-123",
    )
    proc = None
    try:
        for args in (
            ("migrate", "--noinput"),
            ("createsuperuser", "--noinput", "--username", "root", "--email", "root@hq.example"),
        ):
            done = subprocess.run(manage_argv(*args), env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr
        proc = subprocess.Popen(
            ["make", "serve"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # readiness: the probe answers
            try:
                if fetch(f"{base}/healthz", {})[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        else:
            raise AssertionError("gunicorn did not answer /healthz within 60 s")
        yield base, env
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)
            out = proc.communicate(timeout=120)[0].decode(errors="replace")
            print(out[-3000:])
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_make_serve_logs_in_behind_a_tls_proxy_and_serves_hashed_compressed_css(server) -> None:
    base, _ = server
    proxied = {"Host": HOST, "X-Forwarded-Proto": "https"}
    # Plain http without the proxy's header is sent to https; the probe is not.
    status, headers, _ = fetch(f"{base}/admin/login/", {"Host": HOST})
    assert status == 301 and headers["location"].startswith(f"https://{HOST}/")
    status, headers, body = fetch(f"{base}/admin/login/", proxied)
    assert status == 200, body[:300]
    cookies = SimpleCookie(headers.get("set-cookie", ""))
    csrf = cookies["csrftoken"].value
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', body)
    assert token is not None
    form = f"csrfmiddlewaretoken={token.group(1).decode()}&username=root&password=served-pw-123&next=/admin/"
    status, headers, body = fetch(
        f"{base}/admin/login/?next=/admin/",
        {
            **proxied,
            "Cookie": f"csrftoken={csrf}",
            "Referer": f"https://{HOST}/admin/login/",
            "Origin": f"https://{HOST}",
            "Content-Type": "application/x-www-form-urlencoded",
        },
        form.encode(),
    )
    assert status == 302 and headers["location"] == "/admin/", (status, body[:500])
    session = SimpleCookie(headers["set-cookie"])["sessionid"].value
    status, _, page = fetch(f"{base}/admin/", {**proxied, "Cookie": f"sessionid={session}"})
    assert status == 200 and b"Deletion back-office" in page
    css = re.search(rb'href="(/static/admin/css/base\.[0-9a-f]{12}\.css)"', page)
    assert css is not None, "the admin's CSS is not served under a content-hashed name"
    status, headers, body = fetch(f"{base}{css.group(1).decode()}", {"Accept-Encoding": "gzip", **proxied})
    assert status == 200 and headers["content-type"].startswith("text/css")
    assert headers.get("content-encoding") == "gzip" and "max-age" in headers.get("cache-control", "")
