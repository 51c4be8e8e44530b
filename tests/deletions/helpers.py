"""Read the tables the way the seed's runbook does."""

from __future__ import annotations

import json
import signal
import subprocess
from datetime import timedelta
from typing import Any

import time_machine
from django.db import connection, connections
from django.utils import timezone

from deletions.models import DeletionRequest, StageHistory
from tests import target
from tests.conftest import ROOT, manage_argv, subprocess_env
from tests.support import table_rows

SHOW_REQUEST = """
    SELECT target, status, lease_owner, lease_generation, lease_expires_at,
           heartbeat_at, retry_count, next_attempt_at, last_error, completed_at
    FROM entity_deletion_requests WHERE id = %s
"""
SHOW_STAGES = """
    SELECT id, stage, target_community_id, status, is_current,
           started_at, finished_at, metadata_json, last_error
    FROM entity_deletion_stage_history WHERE request_id = %s
    ORDER BY started_at NULLS LAST, id
"""
SHOW_APPROVALS = """
    SELECT approved_by, approved_at, inventory_digest
    FROM entity_deletion_approvals WHERE request_id = %s
    ORDER BY approved_at, id
"""


def _rows(sql: str, request_id: Any) -> list[dict[str, Any]]:
    with connection.cursor() as cur:
        cur.execute(sql, [str(request_id)])
        names = [c.name for c in cur.description]
        rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    for r in rows:
        if isinstance(r.get("metadata_json"), str):
            r["metadata_json"] = json.loads(r["metadata_json"])
    return rows


def show_rows(request_id: Any) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """(request, stages, approvals) exactly as the seed's show_rows SQL reads them."""
    request = _rows(SHOW_REQUEST, request_id)
    return request[0] if request else {}, _rows(SHOW_STAGES, request_id), _rows(SHOW_APPROVALS, request_id)


def all_rows() -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the deletion tables: compared before and after a refusal."""
    return table_rows(
        "entity_deletion_requests",
        "entity_deletion_approvals",
        "entity_deletion_stage_history",
        "entity_deletion_decisions",
        "entity_deletion_stage_attempts",
    )


def current(stages: list[dict[str, Any]]) -> list[tuple[str, str | None, str]]:
    return [
        (s["stage"], str(s["target_community_id"]) if s["target_community_id"] else None, s["status"])
        for s in stages
        if s["is_current"]
    ]


def running_row(request_id: Any) -> StageHistory | None:
    return StageHistory.objects.filter(request_id=request_id, is_current=True, status="running").first()


def start_worker(request_id: Any, *args: str, **env: str) -> subprocess.Popen[str]:
    """`run_deletion` in a real child process on this test database."""
    return subprocess.Popen(
        manage_argv("run_deletion", str(request_id), *args),
        env=subprocess_env(**env),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def effects(request_id: Any) -> list[tuple[Any, ...]]:
    """What the demo application's receiver applied for a request, read from its records:
    (operation, action, generation)."""
    return [(op, action, generation) for op, action, _, generation, _ in target.operations(request_id)]


def believed(result: dict[str, Any], prefix: str = "demo:") -> dict[str, Any]:
    """A stage's saved result without its receipt, once the receipt is checked: the receiver signed
    exactly this evidence, under a key registered for it."""
    from deletions.models import TargetSystem
    from deletions.targets.http import verify_evidence

    evidence = dict(result)
    receipt = evidence.pop("receipt")
    assert verify_evidence(receipt, TargetSystem.objects.get(prefix=prefix).keys) == result
    return evidence


def recorded(operation_id: Any) -> Any:
    """The evidence the demo application's receiver recorded for an operation (None: no record)."""
    with connections["target"].cursor() as cur:
        cur.execute("SELECT evidence FROM receiver.receiver_operations WHERE operation_id = %s", [operation_id])
        row = cur.fetchone()
    return None if row is None else (json.loads(row[0]) if isinstance(row[0], str) else row[0])


def crash_at(point: str, request_id: Any, *args: str) -> DeletionRequest:
    """A worker process that SIGKILLs itself at a named crash point."""
    proc = start_worker(request_id, "--executor-id", "worker-a", *args, CRASH_AT=point)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err
    return DeletionRequest.objects.get(id=request_id)


def take_over(cmd: Any, crashed: DeletionRequest, *args: str) -> Any:
    """Another executor runs once the crashed worker's lease has expired."""
    at = (crashed.lease_expires_at or timezone.now()) + timedelta(seconds=1)
    with time_machine.travel(at, tick=False):
        return cmd("run_deletion", str(crashed.id), "--executor-id", "worker-b", *args)


def target_server() -> Any:
    """An autocommit connection to the target database's server (its `postgres` database), for
    faults a test sets at the target: refusing connections, killing a backend."""
    import psycopg

    conn = connections["target"]
    conn.ensure_connection()
    s = conn.settings_dict
    return psycopg.connect(
        host=s["HOST"] or None,
        port=s.get("PORT") or None,
        user=s["USER"],
        password=s.get("PASSWORD") or None,
        dbname="postgres",
        autocommit=True,
    )


class TargetStopped:
    """The target database stops taking connections, and every session it has is ended (what a
    stopped server looks like from a worker); `start()` lets it take connections again."""

    def __init__(self) -> None:
        self.name = connections["target"].settings_dict["NAME"]
        self.admin = target_server()

    def stop(self) -> None:
        self.admin.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false')
        self.admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [self.name],
        )
        connections["target"].close()

    def start(self) -> None:
        self.admin.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true')

    def __enter__(self) -> TargetStopped:
        self.stop()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.start()
        self.admin.close()


def signed_grant(target: str, community: str, version: int, **changes: Any) -> str:
    """A grant the back-office signs for a person's purge_db in one community at a data version (a fresh
    operation and request, generation 3, good for five minutes), with `changes` laid over it."""
    import uuid

    from core import grants

    return grants.sign(
        {
            "kind": "grant",
            "epoch": 0,
            "operation_id": str(uuid.uuid4()),
            "request_id": str(uuid.uuid4()),
            "action": "purge_db",
            "community_id": community,
            "target": target,
            "generation": 3,
            "executor": "test",
            "expected_version": version,
            "not_after": (timezone.now() + timedelta(minutes=5)).isoformat(),
            **changes,
        }
    )
