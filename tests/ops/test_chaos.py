"""The chaos run's checks can fail: a duplicate effect, a stale write and a lost request are all counted."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from django.db import connection, connections

from deletions.models import DeletionRequest, StageHistory
from ops import chaos
from tests.conftest import submit_and_approve
from tests.support import force

pytestmark = pytest.mark.django_db(transaction=True)


def completed(cmd, target: str) -> DeletionRequest:
    req = submit_and_approve(target)
    assert cmd("run_deletion", str(req.id)).code == 0
    return DeletionRequest.objects.get(id=req.id)


def test_a_clean_run_passes_every_check(cmd) -> None:
    completed(cmd, "demo:clean")
    result = chaos.verdict(1.0, chaos.Tally())
    assert result["completed"] == 1 and result["effects"] == 6
    assert (result["duplicate_effects"], result["stale_writes_accepted"], result["lost"]) == (0, 0, 0)
    assert (result["false_not_applied"], result["false_cancelled"]) == (0, 0)
    assert not chaos.failed(result)


def test_a_second_effect_for_the_same_intended_change_is_a_duplicate(cmd) -> None:
    req = completed(cmd, "demo:dup")
    with connections["target"].cursor() as cur:
        cur.execute(
            """INSERT INTO receiver.receiver_operations
               SELECT %s, request_id, action, community_id, generation, executor, "grant", evidence, applied_at
               FROM receiver.receiver_operations WHERE request_id = %s AND action = 'gate_user'""",
            [uuid.uuid4(), req.id],
        )
    result = chaos.verdict(1.0, chaos.Tally())
    assert result["duplicate_effects"] == 1 and chaos.failed(result)


def test_an_effect_from_an_older_generation_later_in_the_chain_is_a_stale_write(cmd) -> None:
    req = completed(cmd, "demo:stale")
    last = chaos_tail(req)
    with connections["target"].cursor() as cur:
        cur.execute("UPDATE receiver_operations SET generation = generation + 1 WHERE request_id = %s", [req.id])
        cur.execute("UPDATE receiver_operations SET generation = 1 WHERE operation_id = %s", [last.operation_id])
    result = chaos.verdict(1.0, chaos.Tally())
    assert result["stale_writes_accepted"] == 1 and chaos.failed(result)


def test_a_request_nobody_owns_or_checks_is_lost(cmd) -> None:
    req = submit_and_approve("demo:lost")
    DeletionRequest.objects.filter(id=req.id).update(owner="", next_check_at=None, next_attempt_at=None)
    result = chaos.verdict(1.0, chaos.Tally())
    assert result["lost"] == 1 and chaos.failed(result)


def chaos_tail(req: DeletionRequest) -> StageHistory:
    from deletions.contract import chain_order
    from deletions.selectors import load_history

    return StageHistory.objects.get(id=chain_order(load_history(req.id, 100))[-1].id)


@pytest.mark.parametrize("token", ["", "guessed-token"])
@pytest.mark.parametrize("role", ["inner", "worker"])
def test_a_chaos_role_against_a_real_database_changes_nothing(role, token) -> None:
    """`chaos --role inner|worker` pointed at a database its outer role did not start (here the
    test database, with a case in it) exits non-zero in one line before any write: no migration,
    no staff account, no permission, no cancellation."""
    import subprocess
    import sys

    from tests.conftest import ROOT, subprocess_env
    from tests.support import table_rows

    req = submit_and_approve("demo:keep-me")
    tables = ("entity_deletion_requests", "entity_deletion_decisions", "auth_user", "auth_group_permissions")
    before = table_rows(*tables)
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM django_migrations")
        migrations_before = cur.fetchone()[0]
    env = subprocess_env(CHAOS_SCRATCH_TOKEN=token) if token else subprocess_env()
    env.pop("CHAOS_SCRATCH_TOKEN", None) if not token else None
    proc = subprocess.run(
        [sys.executable, "manage.py", "chaos", "--role", role, "--seconds", "5", "--requests", "4"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    said = proc.stderr.strip().splitlines()
    assert len(said) == 1 and f"chaos --role {role}: " in said[0], said
    assert ("scratch server" in said[0]) and "Traceback" not in proc.stderr
    assert table_rows(*tables) == before
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM django_migrations")
        assert cur.fetchone()[0] == migrations_before
    assert DeletionRequest.objects.get(id=req.id).status == "approved"


def test_a_case_cancelled_before_any_effect_while_the_target_holds_one_is_a_false_cancel(cmd) -> None:
    req = completed(cmd, "demo:false-cancel")
    force(DeletionRequest.objects.filter(id=req.id), status="cancelled", last_action="cancelled before any effect")
    result = chaos.verdict(1.0, chaos.Tally())
    assert result["false_cancelled"] == 1 and chaos.failed(result)


def test_an_applied_operation_the_ended_case_never_settled_is_a_false_not_applied(cmd) -> None:
    req = completed(cmd, "demo:false-not-applied")
    last = chaos_tail(req)
    force(StageHistory.objects.filter(id=last.id), status="failed")
    result = chaos.verdict(1.0, chaos.Tally())
    assert result["false_not_applied"] == 1 and chaos.failed(result)


def test_a_run_that_applied_nothing_fails_even_with_every_case_owned(cmd) -> None:
    """Workers that never got going leave every case waiting with an owner and no effect at the
    target: nothing is lost or doubled, and still the run tested nothing, so it fails."""
    submit_and_approve("demo:never-run")
    result = chaos.verdict(1.0, chaos.Tally())
    assert (result["waiting_with_owner"], result["lost"], result["effects"]) == (1, 0, 0)
    assert result["nothing_applied"] and chaos.failed(result)


def test_a_worker_that_ends_by_itself_is_counted_with_its_last_line_and_replaced(tmp_path) -> None:
    """A real process that exits on its own (as a worker whose start-up met the database
    restarting does) is counted once, with the last unindented line of its stderr (the exception),
    and replaced; one the run killed itself is neither counted nor replaced again."""
    import subprocess
    import sys
    from random import Random

    orchestrator = chaos.Orchestrator(workers=1, database_url="unused", datadir=tmp_path / "pg", rng=Random(1))
    replacements: list[int] = []
    orchestrator.start_worker = lambda: replacements.append(1)  # type: ignore[method-assign]

    def spawn(code: str) -> subprocess.Popen[bytes]:
        log = orchestrator.logs / f"{len(orchestrator.procs)}.log"
        with log.open("wb") as stderr:
            proc = subprocess.Popen([sys.executable, "-c", code], stderr=stderr)
        orchestrator.procs.append(proc)
        orchestrator.log_of[proc.pid] = log
        proc.wait()
        return proc

    said = (  # a traceback whose exception message goes on over an indented line, as psycopg's does
        "starting\\nTraceback:\\n  File x\\nOperationalError: server closed the connection\\n"
        "\\tbefore or while processing\\n"
    )
    spawn(f"import sys; sys.stderr.write('{said}'); sys.exit(3)")
    killed = spawn("import sys; sys.exit(9)")
    orchestrator.ended.add(killed.pid)  # as do_kill records its victim
    orchestrator.replace_ended()
    orchestrator.replace_ended()
    assert orchestrator.tally.worker_exits == ["exit 3: OperationalError: server closed the connection"]
    assert replacements == [1]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_kept_chaos_run_is_checked_by_the_docs_sql_as_written() -> None:
    """`chaos --keep DIR` leaves its database stopped in DIR and prints how to query it; the SQL
    of docs/explanation/testing.md, run through that printed command on the kept data, gives what
    the run's JSON line says, column for column."""
    # Not under pytest's tmp_path: each pytest session makes /tmp/pytest-of-USER 0700 again, and the
    # embedded server runs as its own user when root (it opens the folders above its data on start).
    folder = Path(tempfile.mkdtemp(prefix="chaos-keep-"))
    try:
        kept_run_checked(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def kept_run_checked(folder: Path) -> None:
    from tests.conftest import ROOT

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("EMBEDDED_PG") and k not in ("DATABASE_URL", "TARGET_DATABASE_URL")
    }
    env["EMBEDDED_PGDATA"] = str(folder / "unused")  # the run's own settings: never the repository's .pgdata
    kept = folder / "kept"
    argv = [sys.executable, "manage.py", "chaos", "--seconds", "3", "--workers", "2", "--requests", "4"]
    proc = subprocess.run(
        [*argv, "--settle-seconds", "300", "--keep", str(kept)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    said = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not (kept / "pg" / "postmaster.pid").exists()  # stopped cleanly
    assert (kept / "pg" / "PG_VERSION").exists() and "effects" in (kept / "output.txt").read_text()
    (query,) = [line.strip() for line in proc.stdout.splitlines() if "dbshell" in line]
    (stop,) = [line.split("stop it: ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("stop it: ")]

    page = (ROOT / "docs" / "explanation" / "testing.md").read_text()
    body = page.split("<!-- chaos-check:start -->")[1].split("<!-- chaos-check:end -->")[0]
    (sql,) = re.findall(r"```sql\n(.*?)```", body, flags=re.S)
    shell = {**env, "DATABASE_URL": "postgresql://nobody@/elsewhere", "DEMO_DATABASE_URL": "postgresql://x@/y"}
    (folder / "check.sql").write_text(sql)
    try:
        checked = subprocess.run(  # the printed command, as printed, with psql told to stop on an error
            ["bash", "-c", query.replace("-f check.sql", f"-v ON_ERROR_STOP=1 --csv -f {folder / 'check.sql'}")],
            cwd=ROOT, env=shell, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        subprocess.run(["bash", "-c", stop], cwd=ROOT, env=shell, capture_output=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    header, row = [line for line in checked.stdout.splitlines() if "," in line][-2:]
    found = dict(zip(header.split(","), (int(v) for v in row.split(",")), strict=True))
    assert found.pop("completed_without_effect") == 0
    assert found == {k: said[k] for k in found}, (found, said)
    assert said["effects"] > 0 and found["duplicate_effects"] == found["lost"] == 0
