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

The requests are seeded (no django-q2 run enqueued) and the workflows enqueued (by a client, before
the start); the workers are launched when told; the parent waits for every request's completion by
LISTEN (`rawloop.Completions`, no query in the window), then stops them. Each reports its own CPU
from its launch to its stop.
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


def run(processes: int, requests: int, database_url: str, target_url: str, over_http: bool = True) -> dict[str, Any]:
    from bench import floor, rawloop, server

    ids = floor.seed(requests, "dbos")
    dbos = importlib.import_module("dbos")
    client = dbos.DBOSClient(system_database_url=database_url)
    try:
        client._sys_db.run_migrations()  # its system tables, as `dbos migrate` makes them
        for rid in ids:
            client.enqueue({"queue_name": QUEUE, "workflow_name": WORKFLOW, "app_version": VERSION}, str(rid))
    finally:
        client.destroy()
    argv = [sys.executable, str(Path(__file__).resolve())]
    with rawloop.reached(over_http, target_url) as (served, extra):
        env = rawloop.environment(database_url, target_url, **extra)
        children = [
            subprocess.Popen(
                [*argv, f"w{i}"], cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            for i in range(processes)
        ]
        listening = rawloop.Completions(database_url)
        try:
            for child in children:
                assert child.stdout is not None
                if child.stdout.readline().strip() != "ready":
                    raise RuntimeError("a DBOS worker did not get ready")
            before = server.reading()
            if served:
                served.mark()
            start = time.perf_counter()
            for child in children:
                assert child.stdin is not None
                child.stdin.write("go\n")
                child.stdin.flush()
            listening.wait(ids, alive=lambda: all(c.poll() is None for c in children))
            if served:
                receiver_cpu = served.spent()
            for child in children:
                assert child.stdin is not None
                child.stdin.write("stop\n")
                child.stdin.flush()
            printed = [json.loads(child.communicate(timeout=120)[0].strip().splitlines()[-1]) for child in children]
            wall = time.perf_counter() - start
        finally:
            listening.close()
            for child in children:
                if child.poll() is None:
                    child.kill()
    cpu = {"workers": sum(p["cpu_s"] for p in printed)}
    if served:
        cpu["receiver"] = receiver_cpu
    return {"processes": processes, "over_http": over_http, **rawloop.measured(ids, wall, before, cpu)}


def _worker(executor: str) -> None:
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from dbos import DBOS

    _register()
    DBOS(config=_config(os.environ["DATABASE_URL"], executor))  # type: ignore[arg-type]
    from bench import rawloop

    print("ready", flush=True)
    sys.stdin.readline()  # go: launched now (its start is outside the rows' clock, as every side's)
    before = rawloop.cpu_seconds()
    DBOS.launch()
    DBOS.register_queue(QUEUE, worker_concurrency=1, polling_interval_sec=0.01)
    sys.stdin.readline()  # stop: the parent saw every request completed
    cpu = rawloop.cpu_seconds() - before
    DBOS.destroy()
    print(json.dumps({"done": True, "cpu_s": cpu}), flush=True)


if __name__ == "__main__":
    _worker(sys.argv[1])
