"""The peer line: procrastinate running the floor's work (`bench/floor.py`: the engine's own
statements, the same rows) as one job per request, with N worker processes of concurrency one, on
the same server as the drain. Installed for the bench only (`requirements-bench.txt`).

Like for like with the drain: the same requests (as many), the job's connections handled as
django-q2 handles a task's (`close_old_connections()` around it: kept for CONN_MAX_AGE, never
closed after each job), the same clock (stage rows, `rawloop.measured`), the server's counts.
What differs is the guarantee: procrastinate delivers a job at least once and keeps no checkpoint
inside it; the floor's fenced statements are what make a second delivery harmless.

The requests are seeded (no django-q2 run enqueued) and their jobs deferred on procrastinate's queue
before the start, the previous runs' jobs deleted first, so the queue holds this run's jobs alone;
the workers start together once each is ready, and run until the queue is empty (`wait=False`):
the parent waits for their exit. Each reports its own CPU from "go" to its end.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

ROOT = Path(__file__).resolve().parent.parent


def _app(database_url: str) -> Any:
    procrastinate = importlib.import_module("procrastinate")  # the bench's own dependency, not the project's
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=database_url))

    @app.task(name="floor_request")
    def floor_request(rid: str) -> None:
        from django.db import close_old_connections

        from bench import floor

        close_old_connections()  # as django-q2's worker does before and after each task
        try:
            floor.run(UUID(rid), f"procrastinate:{os.getpid()}")
        finally:
            close_old_connections()

    return app


def available() -> bool:
    try:
        importlib.import_module("procrastinate")
    except ImportError:
        return False
    return True


def run(processes: int, requests: int, database_url: str, target_url: str, over_http: bool = True) -> dict[str, Any]:
    from django.db import connection

    from bench import floor, rawloop, server

    ids = floor.seed(requests, "peer")
    app = _app(database_url)
    with app.open():
        if not _schema_applied(app):
            app.schema_manager.apply_schema()
        with connection.cursor() as cur:
            cur.execute("TRUNCATE procrastinate_jobs CASCADE")  # the last run's (done) jobs: its queue is its own
        task = app.tasks["floor_request"]
        for rid in ids:
            task.defer(rid=str(rid))
    argv = [sys.executable, str(Path(__file__).resolve())]
    with rawloop.reached(over_http, target_url) as (served, extra):

        def ready() -> dict[str, Any]:
            read = server.reading()
            if served:
                served.mark()
            return read

        wall, printed, before = rawloop.together(
            argv, processes, rawloop.environment(database_url, target_url, **extra), ready
        )
        cpu = {"workers": sum(p["cpu_s"] for p in printed)}
        if served:
            cpu["receiver"] = served.spent()
    return {"processes": processes, "over_http": over_http, **rawloop.measured(ids, wall, before, cpu)}


def _schema_applied(app: Any) -> bool:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL")
        return bool(cur.fetchone()[0])


def _worker() -> None:
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    app = _app(os.environ["DATABASE_URL"])
    from bench import rawloop

    print("ready", flush=True)
    sys.stdin.readline()
    before = rawloop.cpu_seconds()
    with app.open():
        app.run_worker(wait=False, concurrency=1, install_signal_handlers=False)
    print(json.dumps({"done": True, "cpu_s": rawloop.cpu_seconds() - before}), flush=True)


if __name__ == "__main__":
    _worker()
