"""Cost of one deletion stage through the worker, against a fair raw-SQL baseline.

A stage crosses two databases: the case database and the target system's (alias `target`).
The baseline does what a stage needs, on copies of the real tables in each (`LIKE ...
INCLUDING ALL`: the same columns, indexes and constraints, ordinary WAL-logged tables, durable
commits), in the same five transactions a stage makes, writing the same rows:

1. case mark: lock the request by owner + generation, mark the stage running and submitted, open
   the attempt, mark the request running with its last action;
2. grant: lock the request, check owner + generation, read the current approval (not revoked or
   expired) and the data version it saw, sign the grant (Ed25519, the same library and key);
3. target effect, in the target database: verify the grant, raise the fence, lock the person's
   membership, check its version, count, delete and count again the person's rows there, count
   its agents, move the version on and record the operation with its evidence, once;
4. case result (the seed's "handler's success transaction": completed and still current): lock
   the request, save the evidence, close the attempt, note the request's last action;
5. transition (the seed's next transaction, apart from the result's by rule): lock the request,
   retire the row with its decision, insert the successor, reset the request's retry state and
   move its next check.

The case side's transactions are one statement each, as the engine's are (so one round trip
each); the target's effect keeps its eight statements in one transaction.

Until issue 23's sixth pass the baseline made four: it saved the result and the transition in one
transaction and wrote no attempt and no request columns but `updated_at` (bench/README.md).

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
        "bench_attempts": "entity_deletion_stage_attempts",
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
    """What a stage needs, in minimal SQL, five durable transactions per stage across the two databases."""
    return raw_stages(_seed(n))


# The case side's three writing transactions, one statement each (as the engine's are): each locks
# the request by owner + generation and writes from that lock.
MARK = """
WITH r AS (
    SELECT id FROM bench_requests WHERE id = %(rid)s AND lease_owner = 'bench' AND lease_generation = 1 FOR UPDATE
), s AS (
    UPDATE bench_stages SET status = 'running', started_at = now(), submitted_at = now(), attempts = attempts + 1
    FROM r WHERE bench_stages.id = %(sid)s RETURNING bench_stages.id
), opened AS (
    INSERT INTO bench_attempts (request_id, stage_id, attempt, executor, generation, started_at, outcome, error)
    SELECT %(rid)s, s.id, 1, 'bench', 1, now(), 'running', '' FROM s
)
UPDATE bench_requests SET status = 'running', last_action = 'running purge_db', updated_at = now()
FROM s WHERE bench_requests.id = %(rid)s
"""
RESULT = """
WITH r AS (
    SELECT id FROM bench_requests WHERE id = %(rid)s AND lease_owner = 'bench' AND lease_generation = 1 FOR UPDATE
), s AS (
    UPDATE bench_stages SET status = 'completed', finished_at = now(),
        metadata_json = metadata_json || jsonb_build_object('result', %(evidence)s::jsonb)
    FROM r WHERE bench_stages.id = %(sid)s RETURNING bench_stages.id
), closed AS (
    UPDATE bench_attempts SET outcome = 'completed', finished_at = now() FROM s
    WHERE bench_attempts.stage_id = s.id AND bench_attempts.attempt = 1
)
UPDATE bench_requests SET last_action = 'purge_db done', updated_at = now() FROM s WHERE bench_requests.id = %(rid)s
"""
TRANSITION = """
WITH r AS (
    SELECT id FROM bench_requests WHERE id = %(rid)s AND lease_owner = 'bench' AND lease_generation = 1 FOR UPDATE
), retired AS (
    UPDATE bench_stages SET is_current = false,
        metadata_json = metadata_json || '{"decision": "community_complete"}'
    FROM r WHERE bench_stages.id = %(sid)s RETURNING bench_stages.id
), moved AS (
    UPDATE bench_requests SET retry_count = 0, next_attempt_at = NULL, last_error = NULL, open_question = '',
        next_check_at = now(), last_action = 'advanced', updated_at = now()
    FROM retired WHERE bench_requests.id = %(rid)s
)
INSERT INTO bench_stages (id, request_id, stage, status, is_current, metadata_json, operation_id, attempts, created_at)
SELECT %(successor)s, %(rid)s, 'purge_db', 'pending', true, %(metadata)s::jsonb, %(op)s, 0, now() FROM retired
"""


def raw_stages(seeds: list[tuple[uuid.UUID, uuid.UUID, int]]) -> tuple[float, float, float]:
    """The raw stages of seeded requests (`_seed`): seconds, statements and commits per stage."""
    from core import grants

    n = len(seeds)
    case, target = connections["default"], connections["target"]
    key = grants.receiver_key()
    saved = case.get_autocommit(), target.get_autocommit()
    assert saved[0], "the case side's statements commit on their own"
    target.set_autocommit(False)
    try:
        with counted() as c:
            start = time.perf_counter()
            with case.cursor() as cur, target.cursor() as tcur:
                for rid, sid, mid in seeds:
                    version = 1
                    for _ in range(STAGES_PER_REQUEST):
                        op = uuid.uuid4()
                        # 1. case mark: running and submitted, the attempt opened, the request marked
                        cur.execute(MARK, {"rid": rid, "sid": sid})
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
                        # 4. case result: completed and still current, the attempt closed
                        cur.execute(RESULT, {"rid": rid, "sid": sid, "evidence": evidence})
                        # 5. transition: the row retired with its decision, the successor inserted
                        successor = uuid.uuid4()
                        cur.execute(
                            TRANSITION,
                            {
                                "rid": rid,
                                "sid": sid,
                                "successor": successor,
                                "metadata": json.dumps({"previous_stage_id": str(sid)}),
                                "op": uuid.uuid4(),
                            },
                        )
                        sid = successor
            elapsed = time.perf_counter() - start
    finally:
        target.set_autocommit(saved[1])
    stages = n * STAGES_PER_REQUEST
    return elapsed / stages, c.statements / stages, c.commits / stages
