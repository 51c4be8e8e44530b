"""Drain: requests submitted and approved through the services, each approval enqueuing its run, then
executed by a real `qcluster` with Q_WORKERS=N on a django-q2 queue of its own, timed from the first
stage's start to the last stage's finish as saved (the cluster's own start and stop are reported
apart), with the commits and round trips the server counted and the CPU of every process of the
cluster (its main process, the sentinel, the pusher, the monitor and each worker) and of the
receiver's process when it is reached over HTTP.

The window holds this drain's work and nothing else:
- the approvals enqueue on a staging queue of this drain (`floor.seed(queue=...)`; every other side
  seeds with no run enqueued), and the cluster (the project's settings: its queue is the site's,
  `Q_CLUSTER["name"]`) starts on an empty queue;
- before the window the whole queue table is counted: it must hold this drain's tasks and no other
  (`queue_before`); the window opens with one statement moving them to the cluster's queue;
- the parent waits for the requests' completions by LISTEN (`rawloop.Completions`), not by reading
  the rows or `/proc`; the CPU and the workers' peak memory are read once, after the last completion.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from contextlib import suppress
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _peak_rss_mb(pid: int) -> float:
    with suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _roles(pid: int, workers: int, limit_s: float = 120) -> dict[str, list[Any]]:
    """The cluster's processes once all are up (before the window): the qcluster's main process, its
    sentinel, and the sentinel's children in the order it forks them: the workers, the monitor, the
    pusher (django-q2's `Sentinel.spawn_cluster`)."""
    import psutil

    main = psutil.Process(pid)
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        sentinels = main.children()
        if len(sentinels) == 1:
            forked = sorted(sentinels[0].children(), key=lambda p: (p.create_time(), p.pid))
            if len(forked) == workers + 2:
                time.sleep(0.5)  # the pusher's first poll of the (empty) queue
                return {
                    "qcluster": [main],
                    "sentinel": sentinels,
                    "workers": forked[:workers],
                    "monitor": [forked[workers]],
                    "pusher": [forked[workers + 1]],
                }
        if main.poll() if hasattr(main, "poll") else not main.is_running():
            break
        time.sleep(0.1)  # (before the window: the cluster starting)
    raise RuntimeError(f"the qcluster's {workers} workers, monitor and pusher did not start within {limit_s:.0f} s")


def _queue() -> dict[str, int]:
    """Every django-q2 queue's task count, as the window opens."""
    from django.db.models import Count
    from django_q.models import OrmQ

    return {key: n for key, n in OrmQ.objects.values_list("key").annotate(n=Count("id")).order_by("key")}


def drain(
    requests: int,
    workers: int,
    database_url: str,
    target_url: str,
    over_http: bool = True,
    q_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    from django.conf import settings
    from django.db import connection

    from bench import floor, rawloop, server

    name = str(settings.Q_CLUSTER["name"])  # the site's queue, the one the cluster serves
    staged = f"bench-drain-{uuid.uuid4().hex[:10]}"
    ids = floor.seed(requests, f"d{workers}", queue=staged)
    queued = _queue()
    if queued != {staged: requests}:
        raise RuntimeError(f"the drain's queue before its window is not its own {requests} tasks: {queued}")
    with rawloop.reached(over_http, target_url) as (served, extra):
        env = {
            **rawloop.environment(database_url, target_url, **extra),
            "DJANGO_SETTINGS_MODULE": "bench.settings_drain",
            "BENCH_Q_OPTIONS": json.dumps(q_options or {}),
            "Q_WORKERS": str(workers),
        }
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "qcluster"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        listening = rawloop.Completions(database_url)
        try:
            roles = _roles(proc.pid, workers)
            before = server.reading()
            started = {role: rawloop.cpu_of(ps) for role, ps in roles.items()}
            if served:
                served.mark()
            start = time.perf_counter()
            with connection.cursor() as cur:  # the window opens: the drain's tasks on its cluster's queue
                cur.execute("UPDATE django_q_ormq SET key = %s WHERE key = %s", [name, staged])
            listening.wait(ids, alive=lambda: proc.poll() is None)
            ended = {role: rawloop.cpu_of(ps) for role, ps in roles.items()}
            cpu = {role: sum(ended[role][pid] - started[role].get(pid, 0.0) for pid in ended[role]) for role in roles}
            if served:
                cpu["receiver"] = served.spent()
            peak = max(_peak_rss_mb(p.pid) for p in roles["workers"])
        finally:
            listening.close()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    elapsed = time.perf_counter() - start  # to the cluster's (and its receiver's) exit, as every side's wall time
    # The cluster's start (its processes importing Django and forking) and stop are no part of the drain,
    # as no side's are: timed from the first stage's start, as saved, to the last one's finish
    # (`rawloop.measured`); its commits and round trips are counted whole.
    return {
        "workers": workers,
        "requests": requests,
        "over_http": over_http,
        "queue_before": queued[staged],
        "queue_others_before": sum(queued.values()) - queued[staged],
        **rawloop.measured(ids, elapsed, before, cpu),
        "peak_rss_mb": peak,
    }
