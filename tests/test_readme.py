"""The docs' walkthroughs (the tutorials and how-to guides) run exactly as written, against the test
database, through the demo receiver as its own process."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import ROOT, subprocess_env

# Beside the rest of the suite (`tests.alongside`): most of their time is real time (a retry's
# 30 s delay waited out, the watcher's wake-ups) in processes of their own.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.alongside,
    pytest.mark.timeout(900),
]


def section(name: str) -> str:
    """The shell blocks between a walkthrough's markers, in whichever docs page holds it."""
    pages = [p.read_text() for p in sorted((ROOT / "docs").rglob("*.md"))]
    (text,) = [t for t in pages if f"<!-- {name}:start -->" in t]
    body = text.split(f"<!-- {name}:start -->")[1].split(f"<!-- {name}:end -->")[0]
    blocks = re.findall(r"```bash\n(.*?)```", body, flags=re.S)
    assert blocks
    return "\n".join(blocks)


@pytest.fixture(autouse=True)
def demo_receiver_process(settings: Any) -> Iterator[None]:
    """As a reader runs them: the demo application's receiver in its own process (`make receiver`),
    registered for demo:, reached over HTTP by every command of the walkthrough."""
    from tests.receiver.conftest import Receiver, free_port

    settings.RECEIVER_IN_PROCESS = ""
    receiver = Receiver(port=free_port()).start()
    receiver.register()
    yield
    receiver.stop()
    receiver.log.close()


def run(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    from core.store import connection_url

    # (the demo application's own tool, `python -m samples.demo.seed`, on the receiver's database)
    shell = subprocess_env(**{"RECEIVER_IN_PROCESS": "", "RECEIVER_DATABASE_URL": connection_url("target"), **env})
    shell.pop("DEMO_TOKEN_DIR", None)  # as a reader's shell: the tokens in .demo-tokens/, as the pages say
    proc = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=ROOT,
        env=shell,
        capture_output=True,
        text=True,
        timeout=600,  # below the tests' own limit (pytestmark), so a hang reports its output
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_deletion_walkthrough_runs_as_written() -> None:
    proc = run(section("walkthrough"))
    out = proc.stdout
    assert out.count("(0 rows)") >= 1  # zero stage rows right after approval
    assert "request completed (6 stages)" in out
    assert "already completed" in out
    assert "Exit code: 1" in out and "(retry not due yet)" in out
    assert "not due until" in proc.stderr
    assert "community_complete" in out
    assert out.rstrip().endswith("(1 row)")


def test_retirement_walkthrough_runs_as_written() -> None:
    proc = run(section("retirement-walkthrough"))
    out = proc.stdout
    assert "Exit code: 1 (already held)" in out and "already held by demo" in proc.stderr
    assert "lifecycle=deleted" in out
    assert "status=completed" in out
    assert "point_of_no_return" in out and "purged" in out


def test_custody_walkthrough_runs_as_written() -> None:
    proc = run(section("custody-walkthrough"))
    out, err = proc.stdout, proc.stderr
    assert "person approver-" in out  # named from the approvers' rota at once, never the submitter
    assert '"responsible": "approver-2"' in out
    assert "Exit code: 1 (beyond the legal maximum)" in out and "the legal maximum" in err
    as_support = out.split("as support-1:")[1].split("end")[0]
    assert "demo:cu…" in as_support and "demo:custody-" not in as_support
    assert ": intact; user deletion" in out
    assert "Exit code: 1 (changed)" in out and "NOT intact" in err
    assert "Exit code: 1 (support reads no proofs)" in out and "support-1 may not read proofs" in err
    assert '"dry_run": true' in out


def test_api_walkthrough_runs_as_written(live_server) -> None:
    proc = run(section("api-walkthrough"), API=f"{live_server.url}/api/v1")
    out = proc.stdout
    submitted = out.split("submitted ")[1].split()[0]
    assert f"repeat {submitted}" in out  # the same key and body: the first answer
    assert '"code": "idempotency_key_reused"' in out
    assert '"code": "not_allowed"' in out and "intake-portal is not allowed to approve" in out
    assert "status approved" in out
    assert f"listed {submitted} approved demo:ap…" in out  # the portal reads the target masked
    assert '"field": "priority"' in out
    assert "without a token: 401" in out


def on_a_fresh_database(tmp_path, prefix: str, name: str, variable: str) -> subprocess.CompletedProcess[str]:
    """A walkthrough run against a fresh database of its own on the test server (its URL in `variable`)."""
    from django.db import connection

    from core.store import connection_url

    database = f"{prefix}_walk_{tmp_path.name[-8:].lower()}"
    with connection.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{database}"')
    base, _, query = connection_url().partition("?")
    url = base.rsplit("/", 1)[0] + f"/{database}" + (f"?{query}" if query else "")
    try:
        return run(section(name), **{variable: url})
    finally:
        with connection.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def test_dataset_walkthrough_runs_as_written(tmp_path) -> None:
    """Against a fresh database for the forum on the test server, through a real receiver process."""
    proc = on_a_fresh_database(tmp_path, "forum", "dataset-walkthrough", "FORUM_URL")
    out = proc.stdout
    assert "forum seeded: 40 people" in out
    assert "installed in schema receiver; delete order attachments, comments, posts" in out
    assert "forum: targets are deleted through forum at http://127.0.0.1:8101/receiver/v1/" in out
    assert "request completed" in out
    assert out.count("signed by the receiver (key receiver-1)") >= 3
    assert '"comments":{"action":"delete"' in out and "remains   posts: " in out


def test_shop_walkthrough_runs_as_written(tmp_path) -> None:
    """The second sample, from an empty database to a verified proof, through a real receiver process."""
    proc = on_a_fresh_database(tmp_path, "shop", "shop-walkthrough", "SHOP_URL")
    out = proc.stdout
    assert "shop seeded: 40 people" in out
    assert "rehearsed for 3 people (rolled back; nothing changed):" in out and "  invoices: " in out
    assert "dataset shop v1: installed in schema receiver" in out
    assert "shop: targets are deleted through shop at http://127.0.0.1:8102/receiver/v1/" in out
    assert "request completed (5 stages)" in out
    assert "remains   invoices: " in out and "kept: Invoices are kept for 10 years" in out
    assert ": intact; user deletion" in out


def test_grant_key_rotation_as_written() -> None:
    """The rotation how-to's block prints the new public key alone (`$(…)` takes it); a receiver
    given it accepts the calls of a back-office process under the new key (a submission reads the
    inventory there, as the web server does) and refuses one still under the old key."""
    from core.store import connection_url
    from tests.receiver.conftest import Receiver, free_port
    from wire import keys

    proc = run(section("grant-key-rotation") + '\necho "NEW=$NEW"  # (the test reads the new key too)')
    said = proc.stdout.splitlines()
    assert len(said) == 2 and said[0].startswith("RECEIVER_BACKOFFICE_KEY=") and not proc.stderr, proc
    public, new = said[0].split("=", 1)[1], said[1].split("=", 1)[1]
    assert public == keys.public_text(keys.private(keys.unb64(new)))

    rotated = Receiver(port=free_port()).start(RECEIVER_BACKOFFICE_KEY=public)
    rotated.register()
    submit = (
        ".venv/bin/python manage.py demo_setup --no-data --keep-password >/dev/null\n"
        'T="demo:rotated-$(date +%s%N)"; .venv/bin/python -m samples.demo.seed enroll "$T" >/dev/null\n'
        '.venv/bin/python manage.py submit_deletion --target "$T" '
        "--requested-by operator-1 --token-file .demo-tokens/operator-1"
    )
    try:
        assert '"status": "submitted"' in run(submit, DELETION_GRANT_SIGNING_KEY=new).stdout
        shell = subprocess_env(RECEIVER_IN_PROCESS="", RECEIVER_DATABASE_URL=connection_url("target"))
        shell.pop("DEMO_TOKEN_DIR", None)
        old = subprocess.run(
            ["bash", "-c", submit], cwd=ROOT, env=shell,
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert old.returncode != 0 and "does not verify" in old.stderr, old
    finally:
        rotated.stop()
        rotated.log.close()
