"""A retirement case's proof: what was asked and by whom, the waiting period and its notices, every
hold and decision, the watchers, and the purge with its operation id, as one record `core.proofs`
seals. Read only."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from core import proofs
from retirements.models import RetirementRequest
from retirements.selectors import get


def _at(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def record(req: RetirementRequest) -> dict[str, Any]:
    job = getattr(req, "purge_job", None)
    return {
        "kind": "workspace retirement",
        "id": str(req.id),
        "outcome": req.status,
        "asked": {
            "workspace": req.workspace.slug,
            "requested_by": req.requested_by.get_username(),
            "reason": req.reason,
            "requested_at": _at(req.requested_at),
        },
        "eligibility": {"policy": req.eligibility_policy, "eligible_at": _at(req.eligible_at)},
        "notices": [
            {
                "kind": n.kind,
                "due_at": _at(n.due_at),
                "gating": n.gating,
                "status": n.status,
                "delivered_at": _at(n.delivered_at),
            }
            for n in req.notices.order_by("due_at", "id")
        ],
        "watchers": [
            {"id": str(w.id), "status": w.status, "started_at": _at(w.started_at), "conclusion": w.conclusion}
            for w in req.watchers.order_by("created_at", "id")
        ],
        "purge": (
            {
                "operation_id": str(job.operation_id),
                "status": job.status,
                "created_at": _at(job.created_at),
                "finished_at": _at(job.finished_at),
                "generation": job.lease_generation,
                "refusal": job.refusal,
            }
            if job is not None
            else None
        ),
        "decisions": [
            {"at": _at(d.created_at), "by": d.actor_label, "action": d.action, "reason": d.reason}
            for d in req.decisions.order_by("created_at", "id")
        ],
        "concluded_at": _at(req.concluded_at),
        "conclusion": req.conclusion,
    }


def of(request_id: Any, now: datetime) -> dict[str, Any]:
    return proofs.seal(record(get(request_id)), now)


def lines(proof: dict[str, Any]) -> list[str]:
    r = proof["record"]
    asked = r["asked"]
    out = [
        f"Proof of retirement {r['id']}: {r['outcome']}",
        f"asked     retire {asked['workspace']} for {asked['requested_by']} at {asked['requested_at']}",
        f"          because {asked['reason']}",
        f"eligible  {r['eligibility']['eligible_at']} ({r['eligibility']['policy']})",
    ]
    for n in r["notices"]:
        out.append(f"notice    {n['kind']} due {n['due_at']}: {n['status']} {n['delivered_at'] or ''}".rstrip())
    if r["purge"]:
        p = r["purge"]
        ended = p["finished_at"] or "-"
        out.append(f"purge     operation {p['operation_id']} {p['status']} at {ended} {p['refusal']}".rstrip())
    for d in r["decisions"]:
        out.append(f"decision  {d['at']} {d['by']}: {d['action']} {d['reason']}".rstrip())
    out.append(f"concluded {r['concluded_at'] or '-'}: {r['conclusion'] or '-'}")
    out.append(f"digest    {proof['digest']} (sealed {proof['sealed_at']})")
    out.append(f"signature {proof['signature']} (key {proof['key']})")
    return [proofs.readable(line) for line in out]
