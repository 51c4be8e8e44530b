"""What this receiver counts, served for Prometheus at `GET /receiver/v1/metrics`.

The receiver is one serving process with threads, so its counts live in one registry of its own (not
prometheus-client's global one: a back-office process that mounts the receiver keeps its own metrics
apart). Every call is counted once, from its answer (`answered`): by call and status, its refusal by
kind, and an apply's latency by status; an apply answered with evidence is counted as applied now or
replayed, and the rows it changed from what its evidence says, once per operation (`applied`: an
operation sent again is answered from its first record and counts none).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

from receiver import protocol

REGISTRY = CollectorRegistry()
CALLS = Counter(
    "receiver_calls",
    "Calls answered, by call (discovery, openapi, metrics, health, a protocol call, or other) and HTTP status",
    ["call", "status"],
    registry=REGISTRY,
)
REFUSALS = Counter(
    "receiver_refusals",
    "Calls refused, by status and kind: 422 the effect's refusal kind, 409 the retry kind, 401 signature or replayed",
    ["status", "kind"],
    registry=REGISTRY,
)
APPLY_SECONDS = Histogram(
    "receiver_apply_seconds",
    "Time from an apply's arrival at this receiver's application to its answer, by HTTP status",
    ["status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
    registry=REGISTRY,
)
ROWS_CHANGED = Counter(
    "receiver_rows_changed",
    "Rows the applied effects changed, as their evidence reports them (rows_deleted, agents_removed)",
    ["action"],
    registry=REGISTRY,
)
APPLIED = Counter(
    "receiver_applied",
    "Applies answered with evidence: applied now, or replayed (the same operation's first record answered again)",
    ["outcome"],
    registry=REGISTRY,
)
# What an effect's evidence says it changed, by the action that changed it.
CHANGED = {"rows_deleted": "purge_db", "agents_removed": "purge_agents"}


def call_name(path: str) -> str:
    """The call a path names, bounded to the protocol's own names (anything else is 'other')."""
    name = path.removeprefix(protocol.PREFIX) if path.startswith(protocol.PREFIX) else None
    if name == "":
        return "discovery"
    if name == "openapi.json":
        return "openapi"
    return name if name in (*protocol.CALLS, "metrics", "health") else "other"


def answered(path: str, status: int, body: dict[str, Any], seconds: float) -> None:
    """Count one answered call: by call and status, its refusal by kind, an apply's latency."""
    call = call_name(path)
    CALLS.labels(call, str(status)).inc()
    kind = refusal_kind(status, body)
    if kind:
        REFUSALS.labels(str(status), kind).inc()
    if call == "apply":
        APPLY_SECONDS.labels(str(status)).observe(seconds)


def refusal_kind(status: int, body: dict[str, Any]) -> str:
    """The kind a refusal is counted under ("" for an answer that is none): 422 and 409 say theirs."""
    if status == 401:
        return str(body.get("kind", "signature"))[:40]
    said = body.get({422: "refused", 409: "retry"}.get(status, ""))
    return str(said.get("kind", "unknown"))[:40] if isinstance(said, dict) else ""


def applied(evidence: dict[str, Any], began: datetime) -> None:
    """Count an apply answered with evidence. It was applied now when its evidence was recorded by
    this call (at or after `began`, when the call reached the backend); an operation sent again is
    answered from its first record, made earlier, and changed no rows now."""
    at = parse_datetime(str(evidence.get("applied_at", "")))
    new = at is not None and at >= began
    APPLIED.labels("applied" if new else "replayed").inc()
    if new:
        for field, action in CHANGED.items():
            if isinstance(evidence.get(field), int):
                ROWS_CHANGED.labels(action).inc(evidence[field])


def exposition() -> tuple[bytes, str]:
    """The registry in Prometheus' text format, and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
