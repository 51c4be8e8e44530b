"""Cost of one deletion stage through the worker, against a fair raw-SQL baseline.

A stage crosses two databases: the case database and the target system's (alias `target`).
The baseline does what a stage needs, on copies of the real tables in each (`LIKE ...
INCLUDING ALL`: the same columns, indexes and constraints, ordinary WAL-logged tables, durable
commits), in the same four transactions a stage makes:

1. case mark: lock the request by owner + generation, mark the stage running and submitted;
2. grant: lock the request, check owner + generation, read the current approval (not revoked or
   expired) and the data version it saw, sign the grant (Ed25519, the same library and key);
3. target effect, in the target database: verify the grant, raise the fence, lock the person's
   membership, check its version, count, delete and count again the person's rows there, count
   its agents, move the version on and record the operation with its evidence, once;
4. case result: lock the request, save the evidence, retire the row, insert the successor,
   touch the request.

Statements and commits are counted on both connections by a DEBUG-independent wrapper
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

from django.db import connections

STAGES_PER_REQUEST = 5
ROWS_PER_STAGE = 20  # rows the raw effect deletes per stage (a demo community holds 3-42)
COPIES = {
    "default": {
        "bench_requests": "entity_deletion_requests",
        "bench_approvals": "entity_deletion_approvals",
        "bench_stages": "entity_deletion_stage_history",
    },
    "target": {
        "bench_fences": "target_fences",
        "bench_memberships": "target_memberships",
        "bench_posts": "target_posts",
        "bench_agents": "target_agents",
        "bench_operations": "target_operations",
    },
}


# What commits on its own outside a transaction block: a write, or a locked read (its row lock is
# the statement's own transaction, committed on the server like a write).
WRITES = re.compile(r"\b(UPDATE\s+\w+(\s+\w+)?\s+SET|INSERT\s+INTO|DELETE\s+FROM|FOR\s+UPDATE)\b", re.IGNORECASE)


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
            self.commits += 1  # a write (or a locked read) outside a transaction block commits on its own
        return execute(sql, params, many, context)


@contextmanager
def counted() -> Iterator[Counter]:
    """Statements and commits on both databases' connections."""
    counter = Counter()
    originals = {alias: connections[alias].commit for alias in COPIES}

    def counting(original: Callable[[], None]) -> Callable[[], None]:
        def commit() -> None:  # Django's atomic() commits through the connection, not a statement
            counter.commits += 1
            original()

        return commit

    for alias, original in originals.items():
        connections[alias].commit = counting(original)  # type: ignore[method-assign]
    try:
        with connections["default"].execute_wrapper(counter), connections["target"].execute_wrapper(counter):
            yield counter
    finally:
        for alias, original in originals.items():
            connections[alias].commit = original  # type: ignore[method-assign]


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
    for alias, copies in COPIES.items():
        with connections[alias].cursor() as cur:
            for copy, real in copies.items():
                cur.execute(f"DROP TABLE IF EXISTS {copy}")
                cur.execute(f"CREATE TABLE {copy} (LIKE {real} INCLUDING ALL)")


def _seed(n: int) -> list[tuple[uuid.UUID, uuid.UUID, int]]:
    """n running requests with an approval and a first stage; at the target, one membership per
    request with its rows and an agent for every stage."""
    seeds = []
    with connections["default"].cursor() as cur, connections["target"].cursor() as tcur:
        for _ in range(n):
            rid, sid = uuid.uuid4(), uuid.uuid4()
            cur.execute(
                "INSERT INTO bench_requests (id, entity_type, target, requested_by, inventory_json, inventory_version,"
                " inventory_digest, status, lease_owner, lease_generation, lease_expires_at, retry_count,"
                " created_at, updated_at, owner, open_question, last_action, cancel_requested_by, cancel_reason,"
                " assigned_for, received_at, due_at)"
                " VALUES (%s, 'user', %s, 'bench', %s, 1, %s, 'running', 'bench', 1, now() + interval '60 s', 0,"
                " now(), now(), 'system', '', '', '', '', '', now(), now() + interval '30 days')",
                [rid, f"demo:{rid.hex[:10]}", json.dumps({"version": 1, "communities": []}), "0" * 64],
            )
            cur.execute(
                "INSERT INTO bench_approvals (id, request_id, approved_by, approved_at, inventory_digest,"
                " inventory_version, rules_version, expires_at, preview) VALUES (%s, %s, 'approver', now(), %s,"
                " 1, 1, now() + interval '7 days', '{\"c\": {\"version\": 1}}')",
                [uuid.uuid4(), rid, "0" * 64],
            )
            cur.execute(
                "INSERT INTO bench_stages (id, request_id, stage, status, is_current, metadata_json, operation_id,"
                " attempts, created_at) VALUES (%s, %s, 'purge_db', 'pending', true, '{}', %s, 0, now())",
                [sid, rid, uuid.uuid4()],
            )
            tcur.execute(
                "INSERT INTO bench_memberships (person_id, community_id, role, version)"
                " VALUES (1, %s, 'participant', 1) RETURNING id",
                [rid],
            )
            (mid,) = tcur.fetchone()
            tcur.execute(
                "INSERT INTO bench_posts (membership_id, body, created_at)"
                " SELECT %s, 'post ' || i, now() FROM generate_series(1, %s) i",
                [mid, ROWS_PER_STAGE * STAGES_PER_REQUEST],
            )
            seeds.append((rid, sid, mid))
    return seeds


def raw_round(n: int) -> tuple[float, float, float]:
    """What a stage needs, in minimal SQL, four durable transactions per stage across the two databases."""
    return raw_stages(_seed(n))


def raw_stages(seeds: list[tuple[uuid.UUID, uuid.UUID, int]]) -> tuple[float, float, float]:
    """The raw stages of seeded requests (`_seed`): seconds, statements and commits per stage."""
    from core import grants

    n = len(seeds)
    case, target = connections["default"], connections["target"]
    key = grants.receiver_key()
    saved = case.get_autocommit(), target.get_autocommit()
    case.set_autocommit(False)
    target.set_autocommit(False)
    try:
        with counted() as c:
            start = time.perf_counter()
            with case.cursor() as cur, target.cursor() as tcur:
                for rid, sid, mid in seeds:
                    version = 1
                    for _ in range(STAGES_PER_REQUEST):
                        op = uuid.uuid4()
                        # 1. case mark: running and submitted
                        cur.execute(
                            "SELECT id FROM bench_requests WHERE id = %s AND lease_owner = 'bench'"
                            " AND lease_generation = 1 FOR UPDATE",
                            [rid],
                        )
                        cur.execute(
                            "UPDATE bench_stages SET status = 'running', started_at = now(), submitted_at = now(),"
                            " attempts = attempts + 1 WHERE id = %s",
                            [sid],
                        )
                        case.commit()
                        # 2. grant: lease, authority, the version the approval saw; signed
                        cur.execute(
                            "SELECT r.status, r.cancel_requested_at, a.id, a.inventory_digest, a.revoked_at,"
                            " a.expires_at, (a.preview -> 'c' ->> 'version')::bigint FROM bench_requests r"
                            " JOIN LATERAL (SELECT * FROM bench_approvals WHERE request_id = r.id"
                            " ORDER BY approved_at DESC LIMIT 1) a ON true"
                            " WHERE r.id = %s AND r.lease_owner = 'bench' AND r.lease_generation = 1 FOR UPDATE OF r",
                            [rid],
                        )
                        approval = cur.fetchone()
                        token = grants.sign(
                            {
                                "operation_id": str(op),
                                "request_id": str(rid),
                                "generation": 1,
                                "approval_id": str(approval[2]),
                                "expected_version": version,
                                "not_after": approval[5].isoformat(),
                            }
                        )
                        case.commit()
                        # 3. target effect: verify, fence, version, delete, evidence, record once
                        g = grants.verify(token, key)
                        tcur.execute(
                            "INSERT INTO bench_fences (request_id, generation, min_epoch) VALUES (%s, 1, 0)"
                            " ON CONFLICT (request_id) DO UPDATE SET generation ="
                            " GREATEST(bench_fences.generation, EXCLUDED.generation) RETURNING generation, min_epoch",
                            [rid],
                        )
                        tcur.execute("SELECT version FROM bench_memberships WHERE id = %s FOR UPDATE", [mid])
                        assert tcur.fetchone()[0] == g["expected_version"]
                        tcur.execute("SELECT count(*) FROM bench_posts WHERE membership_id = %s", [mid])
                        (before,) = tcur.fetchone()
                        tcur.execute(
                            "DELETE FROM bench_posts WHERE id IN (SELECT id FROM bench_posts WHERE membership_id = %s"
                            " LIMIT %s)",
                            [mid, ROWS_PER_STAGE],
                        )
                        deleted = tcur.rowcount
                        tcur.execute("SELECT count(*) FROM bench_agents WHERE membership_id = %s", [mid])
                        (agents,) = tcur.fetchone()
                        tcur.execute(
                            "UPDATE bench_memberships SET version = version + 1 WHERE id = %s RETURNING version", [mid]
                        )
                        (version,) = tcur.fetchone()
                        evidence = json.dumps(
                            {
                                "rows_before": before,
                                "rows_deleted": deleted,
                                "rows_remaining": before - deleted,
                                "agents": agents,
                                "version_after": version,
                            }
                        )
                        tcur.execute(
                            "INSERT INTO bench_operations (operation_id, request_id, action, community_id, generation,"
                            " executor, \"grant\", evidence, applied_at) VALUES (%s, %s, 'purge_db', %s, 1, 'bench',"
                            " %s, %s, now()) ON CONFLICT (operation_id) DO NOTHING",
                            [op, rid, rid, token, evidence],
                        )
                        target.commit()
                        # 4. case result + advance to the successor
                        cur.execute(
                            "SELECT id FROM bench_requests WHERE id = %s AND lease_owner = 'bench'"
                            " AND lease_generation = 1 FOR UPDATE",
                            [rid],
                        )
                        cur.execute(
                            "UPDATE bench_stages SET status = 'completed', is_current = false, finished_at = now(),"
                            " metadata_json = jsonb_build_object('result', %s::jsonb) WHERE id = %s",
                            [evidence, sid],
                        )
                        successor = uuid.uuid4()
                        cur.execute(
                            "INSERT INTO bench_stages (id, request_id, stage, status, is_current, metadata_json,"
                            " operation_id, attempts, created_at)"
                            " VALUES (%s, %s, 'purge_db', 'pending', true, %s, %s, 0, now())",
                            [successor, rid, json.dumps({"previous_stage_id": str(sid)}), uuid.uuid4()],
                        )
                        cur.execute("UPDATE bench_requests SET updated_at = now() WHERE id = %s", [rid])
                        case.commit()
                        sid = successor
            elapsed = time.perf_counter() - start
    finally:
        case.set_autocommit(saved[0])
        target.set_autocommit(saved[1])
    stages = n * STAGES_PER_REQUEST
    return elapsed / stages, c.statements / stages, c.commits / stages
