"""The peer line: procrastinate running the same raw stage SQL as `bench/stages.py`, one job per
request (its five stages), with two worker processes of concurrency one, on the same server as
the drain. Installed for the bench only (`requirements-bench.txt`); `procrastinate_ratio` is
the drain's two workers over it.

The requests are seeded and their jobs deferred before the start; the workers start together
once each is ready, and run until the queue is empty (`wait=False`).
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

ROOT = Path(__file__).resolve().parent.parent


def _app(database_url: str) -> Any:
    procrastinate = importlib.import_module("procrastinate")  # the bench's own dependency, not the project's
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=database_url))

    @app.task(name="raw_request")
    def raw_request(rid: str, sid: str, mid: int) -> None:
        from django.db import connections

        from bench import stages

        try:
            stages.raw_stages([(UUID(rid), UUID(sid), mid)])
        finally:
            connections.close_all()  # the job's thread goes away; its connections with it

    return app


def available() -> bool:
    try:
        importlib.import_module("procrastinate")
    except ImportError:
        return False
    return True


def run(processes: int, requests: int, database_url: str, target_url: str) -> dict[str, float]:
    from bench import rawloop, stages

    seeds = stages._seed(requests)
    app = _app(database_url)
    with app.open():
        app.schema_manager.apply_schema()
        task = app.tasks["raw_request"]
        for rid, sid, mid in seeds:
            task.defer(rid=str(rid), sid=str(sid), mid=mid)
    argv = [sys.executable, str(Path(__file__).resolve())]
    elapsed, _ = rawloop.together(argv, processes, rawloop.environment(database_url, target_url))
    count = requests * stages.STAGES_PER_REQUEST
    return {"processes": processes, "stages": count, "seconds": elapsed, "stages_per_s": count / elapsed}


def _worker() -> None:
    import os

    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    app = _app(os.environ["DATABASE_URL"])
    print("ready", flush=True)
    sys.stdin.readline()
    with app.open():
        app.run_worker(wait=False, concurrency=1, install_signal_handlers=False)
    print(json.dumps({"done": True}), flush=True)


if __name__ == "__main__":
    _worker()
