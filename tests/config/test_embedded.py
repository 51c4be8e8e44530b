"""The embedded server survives the wrapper's known traps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from config import embedded

ROOT = Path(__file__).resolve().parents[2]


def test_repair_prunes_dead_pids_and_rewrites_an_empty_list(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / ".handle_pids.json").write_text(json.dumps([os.getpid(), dead.pid]))
    notes = embedded.repair(tmp_path)
    assert json.loads((tmp_path / ".handle_pids.json").read_text()) == [os.getpid()]
    assert any("pruned dead handle PIDs" in n for n in notes)

    (tmp_path / ".handle_pids.json").write_text("")
    notes = embedded.repair(tmp_path)
    assert json.loads((tmp_path / ".handle_pids.json").read_text()) == []
    assert "rewrote unreadable .handle_pids.json" in notes


def test_repair_removes_postmaster_pid_of_an_unrelated_process(tmp_path: Path) -> None:
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / "postmaster.pid").write_text(f"{bystander.pid}\n{tmp_path}\n0\n5432\n{tmp_path}\n\n0 0\nready\n")
        notes = embedded.repair(tmp_path)
        assert not (tmp_path / "postmaster.pid").exists()
        assert notes == [f"removed stale postmaster.pid (PID {bystander.pid} is not our server)"]
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.slow
def test_server_starts_after_sigkill_stale_pid_and_empty_handles(tmp_path: Path) -> None:
    datadir = tmp_path / "pgdata"
    script = (
        "import sys, psycopg; from pathlib import Path; from config import embedded\n"
        "sock = embedded.ensure_running(Path(sys.argv[1]))\n"
        "psycopg.connect(dbname='postgres', user='postgres', host=sock).execute('select 1')\n"
        "print(sock, flush=True)\n"
        "import time; time.sleep(float(sys.argv[2]))\n"
    )
    run = [sys.executable, "-c", script, str(datadir)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        first = subprocess.Popen([*run, "60"], stdout=subprocess.PIPE, text=True, env=env)
        assert first.stdout is not None
        socket_dir = first.stdout.readline().strip()
        assert socket_dir
        first.kill()  # SIGKILL: its PID stays in .handle_pids.json
        first.communicate()
        # Two more processes share the same server at once.
        others = [subprocess.run([*run, "0"], capture_output=True, text=True, env=env, timeout=60) for _ in range(2)]
        assert [o.stdout.strip() for o in others] == [socket_dir, socket_dir], [o.stderr for o in others]

        embedded.stop(datadir)
        bystander = subprocess.Popen(["sleep", "60"])
        (datadir / "postmaster.pid").write_text(f"{bystander.pid}\n{datadir}\n0\n5432\n{datadir}\n\n0 0\nready\n")
        (datadir / ".handle_pids.json").write_text("")
        again = subprocess.run([*run, "0"], capture_output=True, text=True, env=env, timeout=60)
        assert again.returncode == 0, again.stderr
        assert bystander.poll() is None, "an unrelated process was signalled"
        bystander.kill()
        bystander.wait()
        with psycopg.connect(dbname="postgres", user="postgres", host=again.stdout.strip()) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
    finally:
        embedded.stop(datadir)
