"""A retirement request as plain data, for commands and scripts."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from core.errors import BadInput, NotFound
from retirements.models import RetirementRequest


def get(request_id: str | UUID) -> RetirementRequest:
    try:
        rid = UUID(str(request_id))
    except ValueError:
        raise BadInput(f"request id {request_id!r} is not a UUID") from None
    request = RetirementRequest.objects.select_related("workspace", "requested_by", "owner").filter(id=rid).first()
    if request is None:
        raise NotFound(f"no retirement request with id {rid}")
    return request


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def describe(request: RetirementRequest) -> dict[str, Any]:
    ws = request.workspace
    job = getattr(request, "purge_job", None)
    return {
        "id": str(request.id),
        "status": request.status,
        "workspace": {"slug": ws.slug, "lifecycle": ws.lifecycle, "legal_hold": ws.legal_hold},
        "requested_by": request.requested_by.get_username(),
        "reason": request.reason,
        "requested_at": _iso(request.requested_at),
        "eligibility_policy": request.eligibility_policy,
        "eligible_at": _iso(request.eligible_at),
        "next_wake_at": _iso(request.next_wake_at),
        "owner": request.owner.get_username() if request.owner else None,
        "last_action": request.last_action,
        "hold": {"held_at": _iso(request.held_at), "reason": request.hold_reason} if request.held_at else None,
        "blocker": {"reason": request.blocker, "until": _iso(request.blocked_until)} if request.blocker else None,
        "conclusion": request.conclusion or None,
        "notices": [
            {
                "kind": n.kind,
                "due_at": _iso(n.due_at),
                "gating": n.gating,
                "status": n.status,
                "attempts": n.attempts,
                "last_error": n.last_error or None,
            }
            for n in request.notices.order_by("due_at", "id")
        ],
        "watchers": [
            {
                "id": str(w.id),
                "status": w.status,
                "authoritative": w.id == request.watcher_id,
                "started_at": _iso(w.started_at),
                "heartbeat_at": _iso(w.heartbeat_at),
                "conclusion": w.conclusion or None,
                "replaces": str(w.replaces_id) if w.replaces_id else None,
            }
            for w in request.watchers.order_by("created_at")
        ],
        "purge_job": {"operation_id": str(job.operation_id), "status": job.status} if job else None,
        "decisions": [
            {"at": _iso(d.created_at), "actor": d.actor_label, "action": d.action, "reason": d.reason}
            for d in request.decisions.order_by("created_at", "id")
        ],
        "alarms": [
            {"kind": a.kind, "message": a.message, "resolved": a.resolved_at is not None} for a in request.alarms.all()
        ],
    }
