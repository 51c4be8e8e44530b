"""Cost of one deletion stage through the worker, against a raw-SQL baseline.

Usage: .venv/bin/python bench/stages.py [--requests N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")

import django

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402

STAGES_PER_REQUEST = 5
warnings.filterwarnings("ignore", message="Limit for query logging exceeded")


def worker_run(n: int) -> tuple[float, float]:
    from deletions import worker
    from tests.conftest import submit_and_approve

    ids = [submit_and_approve(f"demo:bench-{uuid.uuid4().hex[:10]}").id for _ in range(n)]
    queries: list[int] = []
    start = time.perf_counter()
    for rid in ids:
        with CaptureQueriesContext(connection) as ctx:
            worker.run(rid, executor_id="bench")
        queries.append(len(ctx.captured_queries))
    elapsed = time.perf_counter() - start
    return elapsed / (n * STAGES_PER_REQUEST), statistics.mean(queries) / STAGES_PER_REQUEST


def raw_sql(n: int) -> float:
    """The minimum a stage must write: mark running, save its result, advance to a successor."""
    with connection.cursor() as cur:
        cur.execute(
            "CREATE TEMP TABLE IF NOT EXISTS bench_req"
            " (id uuid primary key, status text, gen int, updated_at timestamptz)"
        )
        cur.execute(
            "CREATE TEMP TABLE IF NOT EXISTS bench_stage (id uuid primary key, req uuid, status text,"
            " is_current bool, meta jsonb, started_at timestamptz)"
        )
    start = time.perf_counter()
    for _ in range(n):
        rid, sid = uuid.uuid4(), uuid.uuid4()
        with connection.cursor() as cur:
            cur.execute("INSERT INTO bench_req VALUES (%s, 'running', 1, now())", [rid])
            cur.execute("INSERT INTO bench_stage VALUES (%s, %s, 'pending', true, '{}', null)", [sid, rid])
            for _ in range(STAGES_PER_REQUEST):
                with connection.cursor() as c2:
                    c2.execute("BEGIN")
                    c2.execute("SELECT 1 FROM bench_req WHERE id = %s AND gen = 1 FOR UPDATE", [rid])
                    c2.execute("UPDATE bench_stage SET status = 'running', started_at = now() WHERE id = %s", [sid])
                    c2.execute("COMMIT")
                    c2.execute("BEGIN")
                    c2.execute("SELECT 1 FROM bench_req WHERE id = %s AND gen = 1 FOR UPDATE", [rid])
                    c2.execute(
                        "UPDATE bench_stage SET status = 'completed', meta = '{\"result\": {}}' WHERE id = %s", [sid]
                    )
                    c2.execute("COMMIT")
                    c2.execute("BEGIN")
                    c2.execute("SELECT 1 FROM bench_req WHERE id = %s AND gen = 1 FOR UPDATE", [rid])
                    c2.execute("UPDATE bench_stage SET is_current = false WHERE id = %s", [sid])
                    sid = uuid.uuid4()
                    c2.execute("INSERT INTO bench_stage VALUES (%s, %s, 'pending', true, '{}', null)", [sid, rid])
                    c2.execute("UPDATE bench_req SET updated_at = now() WHERE id = %s", [rid])
                    c2.execute("COMMIT")
    return (time.perf_counter() - start) / (n * STAGES_PER_REQUEST)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=100)
    args = parser.parse_args()
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        connection.settings_dict["AUTOCOMMIT"] = True
        raw_sql(10)  # warm up
        baseline = raw_sql(args.requests)
        per_stage, queries = worker_run(args.requests)
        print(f"requests: {args.requests}, stages: {args.requests * STAGES_PER_REQUEST}")
        print(f"raw SQL baseline : {baseline * 1000:8.2f} ms per stage (11 statements)")
        print(f"worker           : {per_stage * 1000:8.2f} ms per stage, {queries:.1f} queries per stage")
        print(f"ratio            : {per_stage / baseline:8.2f}x the raw-SQL baseline")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
