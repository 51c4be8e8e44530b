"""The drain without its queue: N processes, each calling `worker.run` on its own approved
requests one after another (the engine's whole path: the run's read, fence, claim and start, every
stage, the release), with no django-q2 around it. Between the drain (the same runs as queued
tasks) and the raw loop (the same transactions in minimal SQL), it says how much of the gap is
the engine's and how much the queue's. Each process also reports the CPU it used per stage.

Usage (by bench/run.py): workerloop.run(processes, requests_each, database_url, target_url).
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(processes: int, requests: int, database_url: str, target_url: str) -> dict[str, float]:
    from bench import rawloop

    env = {**rawloop.environment(database_url, target_url), "DELETION_DEMO_STAGE_DELAY_MS": "0"}
    return rawloop.loop(Path(__file__).resolve(), processes, requests, env)


def _child(requests: int) -> None:
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from bench import rawloop
    from deletions import worker
    from deletions.models import StageHistory
    from tests.conftest import submit_and_approve

    ids = [submit_and_approve(f"demo:loop-{uuid.uuid4().hex[:10]}").id for _ in range(requests)]
    print("ready", flush=True)
    sys.stdin.readline()
    before = rawloop.cpu_seconds()
    for rid in ids:
        worker.run(rid, executor_id=f"loop:{os.getpid()}")
    cpu = rawloop.cpu_seconds() - before
    stages = StageHistory.objects.filter(request_id__in=ids).count()
    print(json.dumps({"stages": stages, "cpu_s": cpu}), flush=True)


if __name__ == "__main__":
    _child(int(sys.argv[1]))
