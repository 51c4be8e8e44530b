"""Drain: requests submitted and approved through the services (each approval enqueues its run
on commit), then executed by a real `qcluster` with Q_WORKERS=N, timed from the first stage's
start to the last stage's finish as saved (the cluster's own start and stop are reported apart),
with the commits and round trips the server counted. Also the peak resident memory of the
cluster's worker processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def drain(
    requests: int, workers: int, database_url: str, target_url: str, q_options: dict[str, Any] | None = None
) -> dict[str, Any]:
    from bench import rawloop, server
    from deletions.models import DeletionRequest, Status
    from tests.conftest import submit_and_approve

    ids = [submit_and_approve(f"demo:d{workers}-{uuid.uuid4().hex[:10]}").id for _ in range(requests)]
    before = server.reading()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DEMO_DATABASE_URL": target_url,
        "DJANGO_SETTINGS_MODULE": "bench.settings_drain",
        "BENCH_Q_OPTIONS": json.dumps(q_options or {}),
        "DJANGO_DEBUG": "0",
        "Q_WORKERS": str(workers),
        "DELETION_DEMO_STAGE_DELAY_MS": "0",
        "LOG_LEVEL": "WARNING",
    }
    env.pop("EMBEDDED_PGDATA", None)
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    peak = 0.0
    try:
        start = time.perf_counter()
        while DeletionRequest.objects.filter(id__in=ids).exclude(status=Status.COMPLETED).exists():
            if proc.poll() is not None:
                raise RuntimeError(f"qcluster exited with {proc.returncode}")
            if time.perf_counter() - start > 600:
                raise RuntimeError("drain did not finish within 600 s")
            peak = max([peak, *(_peak_rss_mb(p) for p in _descendants(proc.pid))])
            time.sleep(0.05)
        peak = max([peak, *(_peak_rss_mb(p) for p in _descendants(proc.pid))])
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    elapsed = time.perf_counter() - start  # to the cluster's exit, as every side's wall time
    # The cluster's start (its processes importing Django and forking) and stop are no part of
    # the drain, as no side's are: timed from the first stage's start, as saved, to the last
    # one's finish (`rawloop.measured`); the cluster's commits and round trips are counted whole.
    return {"workers": workers, "requests": requests, **rawloop.measured(ids, elapsed, before), "peak_rss_mb": peak}
