"""The sides the bench compares, each in N processes from a common start, on one clock.

- `floor`: the guarantee floor of the same work (`bench/floor.py`), each process over requests it seeded;
- `engine`: each process calling `worker.run` on requests it seeded (the engine without a queue);

Every side's throughput is stages over (last saved finish - first saved start), read from the
stage rows the side wrote (the drain's and the peers' too), so process start and teardown are no
part of it; they are reported apart (`outside_s`: the wall time from "go" to the last exit, less
the span). Each process seeds first (no run enqueued: `floor.seed`), says it is ready, and starts
when told, so seeding is not timed; the server's counts (`bench/server.py`) are read after every
process is ready and after the last one exits (and, over HTTP, after the side's own receiver
process stopped). Nothing polls in the window: the parent waits for its children's exit, or for
the requests' completions by LISTEN (`Completions`, the drain and DBOS).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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


# The bench's own trigger on its throw-away case database: a request's completion NOTIFYs its id, inside
# the completing statement (no statement or commit of its own), the same for every side. The bench
# parent LISTENs instead of polling the rows inside a counted window.
CHANNEL = "bench_completed"
NOTIFY_COMPLETED = f"""
CREATE OR REPLACE FUNCTION bench_notify_completed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', NEW.id::text);
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS bench_notify_completed ON entity_deletion_requests;
CREATE TRIGGER bench_notify_completed AFTER UPDATE OF status ON entity_deletion_requests
FOR EACH ROW WHEN (NEW.status = 'completed' AND OLD.status IS DISTINCT FROM NEW.status)
EXECUTE FUNCTION bench_notify_completed();
"""


def install_notify() -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(NOTIFY_COMPLETED)


class Completions:
    """A connection LISTENing for completions, opened before a window: `wait` blocks on its socket
    until every request named has completed (no query in the window)."""

    def __init__(self, database_url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(database_url, autocommit=True)
        self.conn.execute(f"LISTEN {CHANNEL}")

    def wait(self, ids: Iterable[UUID], alive: Callable[[], bool], limit_s: float = 900) -> None:
        want = {str(i) for i in ids}
        deadline = time.monotonic() + limit_s
        while want:
            for note in self.conn.notifies(timeout=2.0):  # wakes every 2 s only to see the processes live
                want.discard(note.payload)
                if not want:
                    break
            if want and not alive():
                raise RuntimeError(f"a process of the side exited with {len(want)} requests not completed")
            if want and time.monotonic() > deadline:
                raise RuntimeError(f"{len(want)} requests not completed within {limit_s:.0f} s")

    def close(self) -> None:
        self.conn.close()


def tree(pid: int) -> list[Any]:
    """A process and its descendants (psutil), the ones alive now."""
    import psutil

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def cpu_of(processes: Iterable[Any]) -> dict[int, float]:
    """{pid: user + system CPU seconds so far} of these processes (psutil), read once each."""
    import psutil

    out = {}
    for p in processes:
        try:
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
        except psutil.NoSuchProcess:
            continue
    return out


@dataclass
class Served:
    """The demo application's receiver in its own process (`python -m receiver serve`), registered for
    `demo:`; its CPU (the gunicorn master and its worker) read from `mark` to `spent`."""

    proc: subprocess.Popen[str]
    marked: float = 0.0

    def cpu(self) -> float:
        return sum(cpu_of(tree(self.proc.pid)).values())

    def mark(self) -> None:
        self.marked = self.cpu()

    def spent(self) -> float:
        return self.cpu() - self.marked


@contextmanager
def receiver(target_url: str) -> Iterator[Served]:
    """A fresh receiver process on the bench's target database for one side's run, registered for
    `demo:` (the registration before it restored after). Stopped with SIGTERM and waited for, its
    children too, so its connections have ended, and their counts reached the server, before the
    side's second reading."""
    import psutil

    from deletions import targets
    from ops import netcut
    from samples.demo.inprocess import DATASET

    port = netcut.free_port()
    proc = netcut.serve_receiver(port, target_url, RECEIVER_DATASET=str(DATASET), RECEIVER_LOG_LEVEL="WARNING")
    previous = targets.registered()
    try:
        netcut.register_started(name="demo target system", prefix="demo:", base_url=netcut.receiver_url(port))
        yield Served(proc)
    finally:
        children = tree(proc.pid)[1:]
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        psutil.wait_procs(children, timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
        for r in previous:
            targets.register(name=r.name, prefix=r.prefix, base_url=r.base_url, keys=r.keys)


OVER_HTTP = {"RECEIVER_IN_PROCESS": ""}


def mounted() -> dict[str, str]:
    """A child's environment for the receiver mounted in its process, checking calls signed for the URL
    the demo's receiver is registered under (the parent's settings say it)."""
    from django.conf import settings

    return {
        "RECEIVER_IN_PROCESS": "samples.demo.inprocess.application",
        "RECEIVER_PUBLIC_URL": settings.RECEIVER_PUBLIC_URL,
    }


@contextmanager
def reached(over_http: bool, target_url: str) -> Iterator[tuple[Served | None, dict[str, str]]]:
    """How a side reaches the demo's receiver: (its own process, the environment saying so), or mounted
    in each of the side's processes (None)."""
    if not over_http:
        yield None, mounted()
        return
    with receiver(target_url) as served:
        yield served, OVER_HTTP


def span(ids: list[UUID]) -> tuple[int, float]:
    """(stages completed, seconds from the first saved start to the last saved finish)."""
    from django.db.models import Max, Min

    from deletions.models import StageHistory

    rows = StageHistory.objects.filter(request_id__in=ids, status="completed")
    found = rows.aggregate(first=Min("started_at"), last=Max("finished_at"))
    return rows.count(), (found["last"] - found["first"]).total_seconds()


def measured(
    ids: list[UUID], wall: float, before: dict[str, Any], cpu: dict[str, float] | None = None, **more: Any
) -> dict[str, Any]:
    """One side's figures from its rows and the server's counts; `cpu`: CPU seconds in the window by
    process (role), reported a stage, and their sum (`cpu_ms_per_stage`)."""
    from bench import server

    stages, seconds = span(ids)
    out = {
        "stages": stages,
        "seconds": seconds,
        "stages_per_s": stages / seconds,
        "outside_s": max(0.0, wall - seconds),
        **server.per_stage(before, server.reading(), stages),
        **more,
    }
    if cpu:
        out["cpu_ms_per_stage_by_process"] = {k: round(1000 * v / stages, 3) for k, v in cpu.items()}
        out["cpu_ms_per_stage"] = round(1000 * sum(cpu.values()) / stages, 3)
        busy = sum(cpu.values()) + (out.get("server_cpu_ms_per_stage") or 0) * stages / 1000
        out["cores_busy"] = round(busy / seconds, 2) if seconds else None  # its processes' and the server's
    return out


def side(
    name: str, processes: int, requests: int, database_url: str, target_url: str, over_http: bool = False
) -> dict[str, Any]:
    """`floor` or `engine` in `processes` processes, `requests` requests each, the receiver mounted in
    each or in its own process (`over_http`). The parent waits for the processes' exit (no query in the
    window); each reports its own CPU from "go" to its end."""
    from bench import server

    argv = [sys.executable, str(Path(__file__).resolve()), name, str(requests)]
    with reached(over_http, target_url) as (served, extra):

        def ready() -> dict[str, Any]:
            read = server.reading()
            if served:
                served.mark()
            return read

        wall, results, before = together(argv, processes, environment(database_url, target_url, **extra), ready)
        cpu = {"workers": sum(r["cpu_s"] for r in results)}
        if served:
            cpu["receiver"] = served.spent()
    ids = [UUID(i) for r in results for i in r["ids"]]
    return {"processes": processes, "over_http": over_http, **measured(ids, wall, before, cpu)}


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
    from deletions.models import DeletionRequest

    ids = floor.seed(requests, name)
    # Each run named with its target, as a queued task names it (the command path reads it first).
    named = dict(DeletionRequest.objects.filter(id__in=ids).values_list("id", "target"))
    owner = f"{name}:{os.getpid()}"
    server.flush()  # the seeding's commits are counted before the start, not as the run's
    print("ready", flush=True)
    sys.stdin.readline()
    before = cpu_seconds()
    for rid in ids:
        if name == "floor":
            floor.run(rid, owner)
        else:
            worker.run(rid, executor_id=owner, target=named[rid])
    cpu = cpu_seconds() - before
    print(json.dumps({"ids": [str(i) for i in ids], "cpu_s": cpu}), flush=True)


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]))
