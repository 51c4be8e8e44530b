"""Cost of one deletion stage through the worker, against a fair raw-SQL baseline.

The baseline does what a stage needs, on copies of the real tables (`LIKE ... INCLUDING
ALL`: the same columns, indexes and constraints, ordinary WAL-logged tables, durable
commits), in the three transactions a stage needs:

1. the running mark: lock the request by owner + generation, mark the stage running;
2. the receiver's effect: lock the request, check owner + generation and the current
   approval (not revoked or expired), raise the fence, insert the effect once;
3. result + advance: lock the request, save the result, retire the row, insert the
   successor, touch the request.

Statements and commits are counted for both by a DEBUG-independent wrapper
(`connection.execute_wrapper`), per stage. Runs interleave (worker, baseline, worker, ...)
and the medians are compared.

`bench/run.py` runs it.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection

STAGES_PER_REQUEST = 5
COPIES = {
    "bench_requests": "entity_deletion_requests",
    "bench_approvals": "entity_deletion_approvals",
    "bench_stages": "entity_deletion_stage_history",
    "bench_fences": "demo_target_fences",
    "bench_effects": "demo_target_effects",
}


WRITES = re.compile(r"\b(UPDATE\s+\w+(\s+\w+)?\s+SET|INSERT\s+INTO|DELETE\s+FROM)\b", re.IGNORECASE)


class Counter:
    """Statements and commits seen on the connection, whatever DEBUG says."""

    def __init__(self) -> None:
        self.statements = 0
        self.commits = 0

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        self.statements += 1
        if sql.strip().upper().startswith("COMMIT"):
            self.commits += 1
        elif context["connection"].get_autocommit() and WRITES.search(sql):
            self.commits += 1  # a write outside a transaction block commits on its own
        return execute(sql, params, many, context)


@contextmanager
def counted() -> Iterator[Counter]:
    counter = Counter()
    original = connection.commit

    def commit() -> None:  # Django's atomic() commits through the connection, not a statement
        counter.commits += 1
        original()

    connection.commit = commit  # type: ignore[method-assign]
    try:
        with connection.execute_wrapper(counter):
            yield counter
    finally:
        connection.commit = original  # type: ignore[method-assign]


def worker_round(n: int) -> tuple[float, float, float]:
    from deletions import worker
    from tests.conftest import submit_and_approve

    ids = [submit_and_approve(f"demo:bench-{uuid.uuid4().hex[:10]}").id for _ in range(n)]
    with counted() as c:
        start = time.perf_counter()
        for rid in ids:
            worker.run(rid, executor_id="bench")
        elapsed = time.perf_counter() - start
    stages = n * STAGES_PER_REQUEST
    return elapsed / stages, c.statements / stages, c.commits / stages


def create_copies() -> None:
    with connection.cursor() as cur:
        for copy, real in COPIES.items():
            cur.execute(f"DROP TABLE IF EXISTS {copy}")
            cur.execute(f"CREATE TABLE {copy} (LIKE {real} INCLUDING ALL)")


def raw_round(n: int) -> tuple[float, float, float]:
    """What a stage needs, in minimal SQL, three durable transactions per stage."""
    seeds = []
    with connection.cursor() as cur:
        for _ in range(n):
            rid, sid = uuid.uuid4(), uuid.uuid4()
            cur.execute(
                "INSERT INTO bench_requests (id, entity_type, target, requested_by, inventory_json, inventory_version,"
                " inventory_digest, status, lease_owner, lease_generation, lease_expires_at, retry_count,"
                " created_at, updated_at, owner, open_question, last_action, cancel_requested_by, cancel_reason)"
                " VALUES (%s, 'user', %s, 'bench', %s, 1, %s, 'running', 'bench', 1, now() + interval '60 s', 0,"
                " now(), now(), 'system', '', '', '', '')",
                [rid, f"demo:{rid.hex[:10]}", json.dumps({"version": 1, "communities": []}), "0" * 64],
            )
            cur.execute(
                "INSERT INTO bench_approvals (id, request_id, approved_by, approved_at, inventory_digest,"
                " inventory_version, rules_version, expires_at) VALUES (%s, %s, 'approver', now(), %s, 1, 1,"
                " now() + interval '7 days')",
                [uuid.uuid4(), rid, "0" * 64],
            )
            cur.execute(
                "INSERT INTO bench_stages (id, request_id, stage, status, is_current, metadata_json, operation_id,"
                " attempts, created_at) VALUES (%s, %s, 'purge_db', 'pending', true, '{}', %s, 0, now())",
                [sid, rid, uuid.uuid4()],
            )
            seeds.append((rid, sid))
    autocommit = connection.get_autocommit()
    connection.set_autocommit(False)
    try:
        with counted() as c:
            start = time.perf_counter()
            with connection.cursor() as cur:
                for rid, sid in seeds:
                    for _ in range(STAGES_PER_REQUEST):
                        # 1. the running mark
                        cur.execute(
                            "SELECT id FROM bench_requests WHERE id = %s AND lease_owner = 'bench'"
                            " AND lease_generation = 1 FOR UPDATE",
                            [rid],
                        )
                        cur.execute(
                            "UPDATE bench_stages SET status = 'running', started_at = now(),"
                            " attempts = attempts + 1 WHERE id = %s",
                            [sid],
                        )
                        connection.commit()
                        # 2. the receiver: fencing, authority, the effect once
                        cur.execute(
                            "SELECT status, cancel_requested_at FROM bench_requests WHERE id = %s"
                            " AND lease_owner = 'bench' AND lease_generation = 1 FOR UPDATE",
                            [rid],
                        )
                        cur.execute(
                            "SELECT inventory_digest, revoked_at, expires_at FROM bench_approvals"
                            " WHERE request_id = %s ORDER BY approved_at DESC LIMIT 1",
                            [rid],
                        )
                        cur.execute(
                            "INSERT INTO bench_fences (request_id, generation) VALUES (%s, 1) ON CONFLICT (request_id)"
                            " DO UPDATE SET generation = GREATEST(bench_fences.generation, EXCLUDED.generation)"
                            " RETURNING generation",
                            [rid],
                        )
                        cur.execute(
                            "INSERT INTO bench_effects (operation_id, request_id, action, generation, executor,"
                            " outcome, applied_at) VALUES (%s, %s, 'purge_db', 1, 'bench', '{}', now())"
                            " ON CONFLICT (operation_id) DO NOTHING RETURNING outcome",
                            [uuid.uuid4(), rid],
                        )
                        connection.commit()
                        # 3. result + advance to the successor
                        cur.execute(
                            "SELECT id FROM bench_requests WHERE id = %s AND lease_owner = 'bench'"
                            " AND lease_generation = 1 FOR UPDATE",
                            [rid],
                        )
                        cur.execute(
                            "UPDATE bench_stages SET status = 'completed', is_current = false, finished_at = now(),"
                            " metadata_json = '{\"result\": {}}' WHERE id = %s",
                            [sid],
                        )
                        successor = uuid.uuid4()
                        cur.execute(
                            "INSERT INTO bench_stages (id, request_id, stage, status, is_current, metadata_json,"
                            " operation_id, attempts, created_at)"
                            " VALUES (%s, %s, 'purge_db', 'pending', true, %s, %s, 0, now())",
                            [successor, rid, json.dumps({"previous_stage_id": str(sid)}), uuid.uuid4()],
                        )
                        cur.execute("UPDATE bench_requests SET updated_at = now() WHERE id = %s", [rid])
                        connection.commit()
                        sid = successor
            elapsed = time.perf_counter() - start
    finally:
        connection.set_autocommit(autocommit)
    stages = n * STAGES_PER_REQUEST
    return elapsed / stages, c.statements / stages, c.commits / stages
