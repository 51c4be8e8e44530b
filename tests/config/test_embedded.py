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
from ops.netcut import free_port

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


def _get(url: str) -> int:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError:
        return 0


@pytest.mark.slow
def test_a_killed_postmaster_is_restarted_by_the_running_processes(tmp_path: Path, observe) -> None:
    """`make run`'s shape (a web server and a cluster on the embedded server), the postmaster
    killed with SIGKILL: /healthz is back to 200 (within 60 s; a few on an idle machine) with no
    command started by hand, and the cluster goes on to complete a deletion approved afterwards."""
    import signal
    import time

    datadir = tmp_path / "pgdata"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    env.update(EMBEDDED_PGDATA=str(datadir), DJANGO_SETTINGS_MODULE="config.settings", PYTHONUNBUFFERED="1")
    env["Q_LOG_LEVEL"] = "INFO"  # the cluster says "running." when it is up
    env.pop("EMBEDDED_PG_CLEANUP", None)
    tokens = tmp_path / "tokens"  # demo_setup writes each demo person's token here
    env["DEMO_TOKEN_DIR"] = str(tokens)
    env["RECEIVER_DATASET"] = "samples/demo/dataset.yaml"  # the receiver serves the demo application

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def until(check, seconds: float) -> float:  # readiness by polling what the user would poll
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            if check():
                return time.monotonic() - started
            time.sleep(0.25)
        raise AssertionError(f"not within {seconds} s")

    def receiver(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "receiver", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
        )

    port, receiver_port = free_port(), free_port()
    web = workers = served = None
    log = (tmp_path / "workers.log").open("w")
    try:
        assert manage("migrate", "--noinput").returncode == 0
        # The demo application beside the case database, on the same embedded server: its tables and the
        # person, then the receiver installed for its dataset (as bin/run-receiver does).
        seeded = subprocess.run(
            [sys.executable, "-m", "samples.demo.seed", "enroll", "demo:after-restart"],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert seeded.returncode == 0, seeded.stderr
        installed = receiver("install", env["RECEIVER_DATASET"])
        assert installed.returncode == 0 and "installed in schema receiver" in installed.stdout, installed.stderr
        served = subprocess.Popen(
            [sys.executable, "-m", "receiver", "serve", "--bind", f"127.0.0.1:{receiver_port}"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        key = receiver("key").stdout.strip()
        url = f"http://127.0.0.1:{receiver_port}/receiver/v1/"
        registered = manage("demo_setup", "--no-data", "--receiver", url, "--receiver-key", key)
        assert registered.returncode == 0, registered.stderr  # operator-1 and approver-1, and the receiver
        web = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "runserver", "--noreload", f"127.0.0.1:{port}"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        workers = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "run_workers"],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        healthz = f"http://127.0.0.1:{port}/healthz"
        until(lambda: _get(healthz) == 200, 60)
        # Both clusters (stage and control) are up: a postmaster killed while one of them is still
        # starting stops run_workers by design (a cluster that cannot start stops the service).
        until(lambda: (tmp_path / "workers.log").read_text().count(" running.") >= 2, 60)

        postmaster = int((datadir / "postmaster.pid").read_text().splitlines()[0])
        os.kill(postmaster, signal.SIGKILL)
        until(lambda: not embedded._is_our_postmaster(postmaster, datadir.resolve()), 60)  # really gone
        back = until(lambda: _get(healthz) == 200, 60)
        assert int((datadir / "postmaster.pid").read_text().splitlines()[0]) != postmaster

        submitted = manage(
            "submit_deletion",
            "--target",
            "demo:after-restart",
            "--requested-by",
            "operator-1",
            "--token-file",
            str(tokens / "operator-1"),
        )
        assert submitted.returncode == 0, submitted.stderr
        req = json.loads(submitted.stdout)
        approved = manage(
            "approve_deletion",
            req["id"],
            "--approved-by",
            "approver-1",
            "--inventory-digest",
            req["inventory_digest"],
            "--token-file",
            str(tokens / "approver-1"),
        )
        assert approved.returncode == 0, approved.stderr
        try:
            until(
                lambda: (
                    json.loads(manage("show_deletion", req["id"], "--json").stdout)["request"]["status"] == "completed"
                ),
                120,
            )
        except AssertionError:
            raise AssertionError((tmp_path / "workers.log").read_text()[-4000:]) from None
        observe(f"postmaster SIGKILLed: /healthz 200 again after {back:.1f} s; a deletion approved after it completed")
    finally:
        for proc in (web, workers, served):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=90)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
        manage("embedded_db", "stop")
        log.close()
