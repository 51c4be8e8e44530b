"""The durable-workflow peer: DBOS, which checkpoints every step of a workflow in PostgreSQL, the
engine's kind. Each request is one workflow: a step for the claim and start, then a step per
stage (the floor's five round trips, `bench/floor.py`), each step's outcome saved by DBOS in its
system tables on the same server (schema `dbos` of the case database) before the next runs. N
worker processes take the workflows from one DBOS queue, one at a time each (worker concurrency
1), polling every 10 ms (a full queue). Installed for the bench only (`requirements-bench.txt`).

The same requests, the same clock (stage rows), the server's counts. What each guarantees: DBOS
resumes a workflow after a crash from its last checkpointed step and runs a step at least once;
the floor's fenced statements make a repeated step harmless, as they make a repeated delivery
harmless under procrastinate and django-q2.

The workflows are enqueued (by a client, before the start) and the workers launched when told;
the parent stops them once every request has completed.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from uuid import UUID

ROOT = Path(__file__).resolve().parent.parent
QUEUE, VERSION, WORKFLOW = "bench", "bench", "floor_request"


def available() -> bool:
    try:
        importlib.import_module("dbos")
    except ImportError:
        return False
    return True


def _config(database_url: str, executor: str) -> dict[str, Any]:
    return {
        "name": "deletion-bench",
        "system_database_url": database_url,
        "application_version": VERSION,
        "executor_id": executor,
        "log_level": "WARNING",
        "run_admin_server": False,
    }


def _register() -> Any:
    """The workflow and its steps (DBOS registers them by name, in each process)."""
    from dbos import DBOS

    @DBOS.step(name="claim_and_start")
    def claim_and_start(rid: str, owner: str) -> dict[str, Any]:
        from bench import floor

        started = floor.start(UUID(rid), owner)
        return {**started.__dict__, "request_id": rid, "stage_id": str(started.stage_id)}

    @DBOS.step(name="stage")
    def stage(held: dict[str, Any], i: int) -> str | None:
        from bench import floor

        run = floor.Started(**{**held, "request_id": UUID(held["request_id"]), "stage_id": UUID(held["stage_id"])})
        nxt = floor.stage(run, i)
        return str(nxt) if nxt else None

    @DBOS.workflow(name=WORKFLOW)
    def floor_request(rid: str) -> int:
        held = claim_and_start(rid, f"dbos:{os.getpid()}")
        for i in range(held["stages"]):
            nxt = stage(held, i)
            if nxt:
                held = {**held, "stage_id": nxt}
        return int(held["stages"])

    return floor_request


def run(processes: int, requests: int, database_url: str, target_url: str) -> dict[str, Any]:
    from bench import floor, rawloop, server
    from deletions.models import DeletionRequest, Status

    ids = floor.seed(requests, "dbos")
    dbos = importlib.import_module("dbos")
    client = dbos.DBOSClient(system_database_url=database_url)
    try:
        client._sys_db.run_migrations()  # its system tables, as `dbos migrate` makes them
        for rid in ids:
            client.enqueue({"queue_name": QUEUE, "workflow_name": WORKFLOW, "app_version": VERSION}, str(rid))
    finally:
        client.destroy()
    env = rawloop.environment(database_url, target_url)
    argv = [sys.executable, str(Path(__file__).resolve())]
    children = [
        subprocess.Popen([*argv, f"w{i}"], cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for i in range(processes)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError("a DBOS worker did not get ready")
        before = server.reading()
        start = time.perf_counter()
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        pending = DeletionRequest.objects.filter(id__in=ids).exclude(status=Status.COMPLETED)
        while pending.exists():
            if any(c.poll() is not None for c in children):
                raise RuntimeError("a DBOS worker exited before the queue was drained")
            if time.perf_counter() - start > 900:
                raise RuntimeError("DBOS did not drain within 900 s")
            time.sleep(0.05)
        for child in children:
            assert child.stdin is not None
            child.stdin.write("stop\n")
            child.stdin.flush()
        for child in children:
            child.communicate(timeout=120)
        wall = time.perf_counter() - start
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    return {"processes": processes, **rawloop.measured(ids, wall, before)}


def _worker(executor: str) -> None:
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from dbos import DBOS

    _register()
    DBOS(config=_config(os.environ["DATABASE_URL"], executor))  # type: ignore[arg-type]
    print("ready", flush=True)
    sys.stdin.readline()  # go: launched now (its start is outside the rows' clock, as every side's)
    DBOS.launch()
    DBOS.register_queue(QUEUE, worker_concurrency=1, polling_interval_sec=0.01)
    sys.stdin.readline()  # stop: the parent saw every request completed
    DBOS.destroy()
    print(json.dumps({"done": True}), flush=True)


if __name__ == "__main__":
    _worker(sys.argv[1])
