"""The receiver installed alone, as an organisation installs it next to its database: `receiver/` and
`wire/` copied into an empty folder, a fresh virtual environment made from `requirements-receiver.txt`
and nothing else (no django-q2, no django-ninja, none of the back-office), then `check`, `install`,
`serve` and a whole deletion of a forum person through it, the back-office reaching it over HTTP."""

from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core import grants
from core.authority import named
from deletions.models import DeletionRequest
from deletions.services import deletion_approve, deletion_submit
from ops import netcut
from tests.conftest import ROOT, run_command
from tests.receiver.test_dataset import DATASET, busiest, forum, rows  # noqa: F401  (forum: a fixture)
from wire import keys

pytestmark = [pytest.mark.django_db(transaction=True)]
BACK_OFFICE_ONLY = ("django-q2", "django-ninja", "django-axes", "django-csp", "django-htmx", "whitenoise", "httpx")


def venv(at: Path) -> Path:
    """A fresh virtual environment holding what `requirements-receiver.txt` names (pip's cache serves
    what this machine installed before); its python."""
    subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", str(at)], check=True, timeout=300)
    python = at / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    installed = subprocess.run(
        [*pip, "-r", str(ROOT / "requirements-receiver.txt")], capture_output=True, text=True, timeout=900
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    return python


def test_the_receiver_installed_alone_checks_installs_serves_and_deletes_a_forum_person(
    forum: str,  # noqa: F811
    tmp_path: Path,
    settings: Any,
) -> None:
    app = tmp_path / "receiver-alone"
    for package in ("receiver", "wire"):
        shutil.copytree(ROOT / package, app / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(DATASET, app / "dataset.yaml")
    python = venv(tmp_path / "venv")
    listed = subprocess.run([str(python), "-m", "pip", "list"], capture_output=True, text=True, check=True).stdout
    names = {line.split()[0].lower() for line in listed.splitlines()[2:] if line.strip()}
    assert "django" in names and not names & set(BACK_OFFICE_ONLY), sorted(names)
    assert sorted(p.name for p in app.iterdir()) == ["dataset.yaml", "receiver", "wire"]

    port = netcut.free_port()
    url = f"http://127.0.0.1:{port}/receiver/v1/"
    env = {
        "PATH": "/usr/bin:/bin",
        "RECEIVER_DATABASE_URL": forum,
        "RECEIVER_BACKOFFICE_KEY": grants.public_key(),
        "RECEIVER_SIGNING_KEY": keys.b64(secrets.token_bytes(32)),
        "RECEIVER_PUBLIC_URL": url,
    }

    def receiver(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(python), "-m", "receiver", *args], cwd=app, env=env, capture_output=True, text=True, timeout=300
        )

    checked = receiver("check", "dataset.yaml", "--rehearse", "3")
    assert checked.returncode == 0, checked.stderr
    installed = receiver("install", "dataset.yaml")
    assert installed.returncode == 0 and "installed" in installed.stdout, installed.stderr
    key = receiver("key")
    assert key.returncode == 0 and key.stdout.startswith("receiver-1="), key.stderr

    served = subprocess.Popen(
        [str(python), "-m", "receiver", "serve", "--bind", f"127.0.0.1:{port}"],
        cwd=app,
        env={**env, "RECEIVER_DATASET": "dataset.yaml"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert served.stdout is not None
        said = served.stdout.readline().strip()
        assert said == f"Receiver: {url}", said + (
            served.stderr.read() if served.stderr and served.poll() is not None else ""
        )
        settings.RECEIVER_IN_PROCESS = ""
        key_id, _, public = key.stdout.strip().partition("=")
        registered = run_command(
            "register_target",
            "--name",
            "forum",
            "--prefix",
            "forum:",
            "--url",
            url,
            "--key",
            f"{key_id}={public}",
            token=False,
        )
        assert registered.code == 0, registered.err

        uid, handle = busiest(forum)
        assert rows(forum, "SELECT count(*) FROM comments WHERE author_id = %(u)s", u=uid)[0][0] > 0
        req = deletion_submit(target=f"forum:{handle}", actor=named("operator-a"), reason="receiver alone")
        deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
        ran = run_command("run_deletion", str(req.id))
        assert ran.code == 0, ran.err
        assert DeletionRequest.objects.get(id=req.id).status == "completed"
        for table, column in (("comments", "author_id"), ("memberships", "user_id")):
            assert rows(forum, f"SELECT count(*) FROM {table} WHERE {column} = %(u)s", u=uid) == [(0,)], table
        left = rows(forum, "SELECT DISTINCT title, body FROM posts WHERE author_id = %(u)s", u=uid)
        assert left in ([], [("[deleted]", "[deleted]")]), left  # (the dataset anonymizes posts: the thread stays)
    finally:
        served.terminate()
        assert served.wait(timeout=60) == 0
        for stream in (served.stdout, served.stderr):
            if stream is not None:
                stream.close()
