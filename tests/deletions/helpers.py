"""Read the tables the way the seed's runbook does."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection

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
    out = {}
    with connection.cursor() as cur:
        for table in (
            "entity_deletion_requests",
            "entity_deletion_approvals",
            "entity_deletion_stage_history",
            "entity_deletion_decisions",
        ):
            cur.execute(f"SELECT * FROM {table} ORDER BY 1")
            out[table] = cur.fetchall()
    return out


def current(stages: list[dict[str, Any]]) -> list[tuple[str, str | None, str]]:
    return [
        (s["stage"], str(s["target_community_id"]) if s["target_community_id"] else None, s["status"])
        for s in stages
        if s["is_current"]
    ]
