"""The deletion case as a support lead reads it: panel, inventory, chain picture. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core.admin import CasePanel
from deletions.store.requests import chain_order
from deletions.store.types import StageSnapshot
from deletions.users.inventory import community_ids


@dataclass
class Box:
    label: str
    status: str  # completed | running | pending | failed | not_started | skipped
    detail: str = ""

    @property
    def status_label(self) -> str:
        return self.status.replace("_", " ")


@dataclass
class Lane:
    title: str
    boxes: list[Box] = field(default_factory=list)


def open_question(status: str, stored: str, cancel_requested: bool, lease_expired: bool) -> str:
    if stored:
        return stored
    if status == "submitted":
        return "waiting for a second operator to approve the inventory"
    if cancel_requested and status not in ("cancelled", "completed"):
        return "cancellation recorded; the worker stops at its next transition"
    if status == "running" and lease_expired:
        return "worker stopped mid-stage; its effect is unknown until the next worker re-checks the target system"
    return ""


APPROVERS = "approvers (group)"
ON_CALL = "operators on call (group)"


def responsible(req: Any, now: datetime) -> str:
    """Who must act next, from the case's state; never the submitter for an approval. Pure.

    | state                                  | responsible                                    |
    | submitted, needs_review                | the approvers                                  |
    | approved / running with a live lease   | the system: executor and generation            |
    | approved, no worker yet                | the system: the dispatcher, next run            |
    | running with its lease lost (stuck)    | the operators on call                          |
    | retry_wait (plain retry)               | the system, at the retry time                  |
    | retry_wait (effect unknown)            | the named owner, else the operators on call    |
    | needs_attention                        | the named owner, else the operators on call    |
    | completed, cancelled                   | nobody                                         |
    """
    live = req.lease_owner is not None and req.lease_expires_at is not None and req.lease_expires_at > now
    if req.status in ("submitted", "needs_review"):
        return APPROVERS
    if req.status in ("approved", "running") and live:
        return f"system: {req.lease_owner} (generation {req.lease_generation})"
    if req.status == "approved":
        return "system: the next worker (dispatcher)"
    if req.status == "running":
        return ON_CALL  # a worker was lost mid-stage: someone should look if no replacement takes over
    if req.status == "retry_wait" and not req.open_question:
        return "system: retry at the next attempt"
    if req.status in ("retry_wait", "needs_attention"):
        named = req.owner if req.owner and req.owner != req.requested_by else ""
        return named or ON_CALL
    return "-"


def overdue(req: Any, now: datetime) -> bool:
    """A waiting case whose next check has passed."""
    due = req.next_check_at or req.next_attempt_at
    return req.status not in ("completed", "cancelled") and due is not None and due < now


def panel(req: Any, now: datetime) -> CasePanel:
    lease_expired = req.lease_owner is None or (req.lease_expires_at is not None and req.lease_expires_at <= now)
    attempt = f"{req.lease_owner} (generation {req.lease_generation})" if req.lease_owner else "none"
    return CasePanel(
        what=f"Delete the data of user {req.target} ({len(community_ids(req.inventory_json))} communities)",
        status=req.status,
        status_label=req.get_status_display(),
        open_question=open_question(req.status, req.open_question, req.cancel_requested_at is not None, lease_expired),
        next_check_at=req.next_check_at or req.next_attempt_at,
        owner=responsible(req, now) + (" (next check overdue)" if overdue(req, now) else ""),
        last_action=req.last_action or "-",
        attempt=attempt,
    )


def actions(req: Any, perms: set[str]) -> dict[str, bool]:
    """Which action buttons to offer; the services re-check everything on POST."""
    open_ = req.status not in ("completed", "cancelled")
    return {
        "approve": req.status in ("submitted", "needs_review") and "deletions.approve_deletionrequest" in perms,
        "cancel": open_ and req.cancel_requested_at is None and "deletions.cancel_deletionrequest" in perms,
        "resume": req.status == "needs_attention" and "deletions.run_deletionrequest" in perms,
        "run": req.status in ("approved", "running", "retry_wait") and "deletions.run_deletionrequest" in perms,
    }


def chain_picture(inventory: dict[str, Any], stages: list[StageSnapshot]) -> list[Lane]:
    """Gate, then one lane per inventory community, in workflow order; unreached steps greyed."""
    ordered = chain_order(stages)
    gate = next((s for s in ordered if s.stage == "gate_user"), None)
    lanes = [Lane("gate", [Box("gate user", gate.status if gate else "not_started")])]
    for index, cid in enumerate(community_ids(inventory)):
        rows = [s for s in ordered if s.community_id == cid]
        lane = Lane(f"community {chr(ord('B') + index) if index < 24 else index} · {cid[-4:]}")
        db = next((s for s in rows if s.stage == "purge_db"), None)
        agents = next((s for s in rows if s.stage == "purge_agents"), None)
        lane.boxes.append(Box("purge database", db.status if db else "not_started", _detail(db)))
        skipped = db is not None and (db.decision or {}).get("transition") == "community_complete"
        lane.boxes.append(
            Box("purge agents", "skipped" if skipped else (agents.status if agents else "not_started"), _detail(agents))
        )
        lanes.append(lane)
    return lanes


def _detail(row: StageSnapshot | None) -> str:
    if row is None:
        return ""
    if row.result and "has_agents" in row.result:
        return "agents found" if row.result["has_agents"] else "no agents"
    return row.last_error or ""
