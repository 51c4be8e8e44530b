"""The machine's limit for the drain: the raw stage loop of `bench/stages.py` (the same durable
transactions a stage makes, in minimal SQL, on copies of the real tables) run by N processes at
once on the same server, in stages per second from a common start to the last one done.

The drain's workers are compared with it in the same bench run (`drain_vs_limit_2w`). Each
process seeds its own requests first, says it is ready, and starts when told to, so seeding is
not timed.

Usage (by bench/run.py): rawloop.limit(processes, requests_each, database_url, target_url).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def environment(database_url: str, target_url: str) -> dict[str, str]:
    """A child's environment: the bench's own databases, production-like settings."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "TARGET_DATABASE_URL": target_url,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_DEBUG": "0",
        "LOG_LEVEL": "WARNING",
    }
    env.pop("EMBEDDED_PGDATA", None)
    return env


def together(argv: list[str], processes: int, env: dict[str, str]) -> tuple[float, list[dict[str, Any]]]:
    """Start `processes` children, wait until each says "ready", tell them all "go" at once, and
    time them to the last one done: (seconds, what each printed last, as JSON)."""
    children = [
        subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError(f"{' '.join(argv)}: a process did not get ready")
        start = time.perf_counter()
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        printed = [child.communicate(timeout=600)[0] for child in children]
        elapsed = time.perf_counter() - start
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    return elapsed, [json.loads(out.strip().splitlines()[-1]) for out in printed]


def limit(processes: int, requests: int, database_url: str, target_url: str) -> dict[str, float]:
    """The raw loop in `processes` processes, `requests` requests each (seeded before the start)."""
    return loop(Path(__file__).resolve(), processes, requests, environment(database_url, target_url))


def loop(script: Path, processes: int, requests: int, env: dict[str, str]) -> dict[str, float]:
    """`script` (a loop over `requests` requests it seeds itself) in `processes` processes from a
    common start: stages per second, and the client CPU per stage the processes report."""
    elapsed, results = together([sys.executable, str(script), str(requests)], processes, env)
    stages = sum(r["stages"] for r in results)
    return {
        "processes": processes,
        "stages": stages,
        "seconds": elapsed,
        "stages_per_s": stages / elapsed,
        "cpu_ms_per_stage": 1000 * sum(r["cpu_s"] for r in results) / stages,
    }


def cpu_seconds() -> float:
    """This process's CPU time so far (user and system)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def _child(requests: int) -> None:
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from bench import stages

    seeds = stages._seed(requests)
    print("ready", flush=True)
    sys.stdin.readline()
    before = cpu_seconds()
    per_stage, _, _ = stages.raw_stages(seeds)
    cpu = cpu_seconds() - before
    done = len(seeds) * stages.STAGES_PER_REQUEST
    print(json.dumps({"stages": done, "per_stage_s": per_stage, "cpu_s": cpu}), flush=True)


if __name__ == "__main__":
    _child(int(sys.argv[1]))
