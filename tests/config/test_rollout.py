"""Seed 000's rollout rule: code older than the schema refuses to start, and says to roll forward.

A newer release is played by recording a migration this code does not have, as that release's
`migrate` would have; then the web server and the workers are started as real processes. The receiver's
schema is its installed dataset: it refuses to serve another file than the one installed."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from django.db import connections

from core.store import connection_url
from tests.conftest import ROOT, manage_argv, subprocess_env

pytestmark = [pytest.mark.django_db(transaction=True)]
NEWER = "9999_from_a_newer_release"


@pytest.fixture
def newer_schema() -> Iterator[None]:
    with connections["default"].cursor() as cur:
        cur.execute("INSERT INTO django_migrations (app, name, applied) VALUES (%s, %s, now())", ["deletions", NEWER])
    yield
    with connections["default"].cursor() as cur:
        cur.execute("DELETE FROM django_migrations WHERE name = %s", [NEWER])


def started(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, env=subprocess_env(**env), capture_output=True, text=True, timeout=120)


STARTS = {
    "the web server (WSGI)": [sys.executable, "-c", "import config.wsgi"],
    "the development server": manage_argv("runserver", "--noreload", "127.0.0.1:0"),
    "the workers": manage_argv("run_workers"),
    "a deletion worker": manage_argv("run_deletion", "00000000-0000-0000-0000-000000000001"),
    "a retirement watcher": manage_argv("run_watchers"),
}


@pytest.mark.parametrize("what", list(STARTS))
def test_code_older_than_the_schema_refuses_to_start(newer_schema: None, what: str) -> None:
    ran = started(STARTS[what])
    assert ran.returncode == 3, (ran.stdout, ran.stderr)
    said = ran.stderr.strip().splitlines()
    assert len(said) == 1 and f"deletions.{NEWER}" in said[0] and "roll forward" in said[0], ran.stderr


def test_the_receiver_refuses_to_serve_a_dataset_file_other_than_the_one_installed() -> None:
    from samples.demo.inprocess import DATASET

    with connections["target"].cursor() as cur:  # a newer file installed since, as its `install` would have
        cur.execute("UPDATE receiver.receiver_installed SET digest = 'newer' WHERE dataset = 'demo' RETURNING digest")
        (digest,) = cur.fetchone()
    try:
        argv = [sys.executable, "-m", "receiver", "serve", "--bind", "127.0.0.1:0"]
        ran = started(argv, RECEIVER_DATABASE_URL=connection_url("target"), RECEIVER_DATASET=str(DATASET))
    finally:
        from samples.demo import inprocess

        inprocess.install()  # the suite's file installed again
    assert digest == "newer"
    assert ran.returncode == 3 and "this file is not what is installed in the database" in ran.stderr, ran.stderr


def test_the_same_code_starts_against_the_schema_it_knows() -> None:
    ran = started([sys.executable, "-c", "import config.wsgi; print('started')"])
    assert ran.returncode == 0 and "started" in ran.stdout, ran.stderr
