"""The sides the bench compares, each in N processes from a common start, on one clock.

- `floor`: the floor of the same work (`bench/floor.py`), each process over requests it seeded;
- `engine`: each process calling `worker.run` on requests it seeded (the engine without a queue);

Every side's throughput is stages over (last saved finish - first saved start), read from the
stage rows the side wrote (the drain's and the peers' too), so process start and teardown are no
part of it; they are reported apart (`outside_s`: the wall time from "go" to the last exit, less
the span). Each process seeds first, says it is ready, and starts when told, so seeding is not
timed; the server's counts (`bench/server.py`) are read after every process is ready and after
the last one exits.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

ROOT = Path(__file__).resolve().parent.parent


def environment(database_url: str, target_url: str, **extra: str) -> dict[str, str]:
    """A child's environment: the bench's own databases, production-like settings."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DEMO_DATABASE_URL": target_url,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        "DELETION_DEMO_STAGE_DELAY_MS": "0",
        **extra,
    }
    env.pop("EMBEDDED_PGDATA", None)
    return env


def together(
    argv: list[str], processes: int, env: dict[str, str], ready: Callable[[], Any] = lambda: None
) -> tuple[float, list[dict[str, Any]], Any]:
    """Start `processes` children, wait until each says "ready", call `ready`, tell them all "go"
    at once, and wait for the last: (wall seconds from "go", what each printed last as JSON, what
    `ready` returned)."""
    children = [
        subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError(f"{' '.join(argv)}: a process did not get ready")
        seen = ready()
        start = time.perf_counter()
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        printed = [child.communicate(timeout=900)[0] for child in children]
        elapsed = time.perf_counter() - start
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    return elapsed, [json.loads(out.strip().splitlines()[-1]) for out in printed], seen


def span(ids: list[UUID]) -> tuple[int, float]:
    """(stages completed, seconds from the first saved start to the last saved finish)."""
    from django.db.models import Max, Min

    from deletions.models import StageHistory

    rows = StageHistory.objects.filter(request_id__in=ids, status="completed")
    found = rows.aggregate(first=Min("started_at"), last=Max("finished_at"))
    return rows.count(), (found["last"] - found["first"]).total_seconds()


def measured(ids: list[UUID], wall: float, before: dict[str, int], cpu_s: float | None = None) -> dict[str, Any]:
    """One side's figures from its rows and the server's counts."""
    from bench import server

    stages, seconds = span(ids)
    out = {
        "stages": stages,
        "seconds": seconds,
        "stages_per_s": stages / seconds,
        "outside_s": max(0.0, wall - seconds),
        **server.per_stage(before, server.reading(), stages),
    }
    if cpu_s is not None:
        out["cpu_ms_per_stage"] = 1000 * cpu_s / stages
    return out


def side(name: str, processes: int, requests: int, database_url: str, target_url: str, **extra: str) -> dict[str, Any]:
    """`floor` or `engine` in `processes` processes, `requests` requests each (`extra`: more environment)."""
    from bench import server

    argv = [sys.executable, str(Path(__file__).resolve()), name, str(requests)]
    wall, results, before = together(argv, processes, environment(database_url, target_url, **extra), server.reading)
    ids = [UUID(i) for r in results for i in r["ids"]]
    return {"processes": processes, **measured(ids, wall, before, sum(r["cpu_s"] for r in results))}


def cpu_seconds() -> float:
    """This process's CPU time so far (user and system)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def _child(name: str, requests: int) -> None:
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from bench import floor, server
    from deletions import worker

    ids = floor.seed(requests, name)
    owner = f"{name}:{os.getpid()}"
    server.flush()  # the seeding's commits are counted before the start, not as the run's
    print("ready", flush=True)
    sys.stdin.readline()
    before = cpu_seconds()
    for rid in ids:
        if name == "floor":
            floor.run(rid, owner)
        else:
            worker.run(rid, executor_id=owner)
    cpu = cpu_seconds() - before
    print(json.dumps({"ids": [str(i) for i in ids], "cpu_s": cpu}), flush=True)


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]))
