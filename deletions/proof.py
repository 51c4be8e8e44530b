"""A deletion case's proof: what was asked and by whom, the approved proposal and its digest, every
approval and revocation, every stage with its operation id, attempts and the target system's
evidence, the cancellation, the withdrawals and the decision log, as one record `core.proofs` seals.

Read only; the same record prints as text (`lines`) and on the admin's printable page."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from core import present, proofs
from deletions import case
from deletions.contract import chain_order
from deletions.models import DeletionRequest
from deletions.selectors import get_request, stage_snapshot


def _at(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def record(req: DeletionRequest) -> dict[str, Any]:
    stages = chain_order([stage_snapshot(s) for s in req.stages.order_by("created_at", "id")])
    attempts = case.attempts_by_stage(list(req.attempts.order_by("started_at", "attempt")))
    decisions = list(req.decisions.order_by("created_at", "id"))
    submitted = next((d for d in decisions if d.action == "submit"), None)
    return {
        "kind": "user deletion",
        "id": str(req.id),
        "outcome": req.status,
        "asked": {
            "target": req.target,
            "requested_by": req.requested_by,
            "reason": submitted.reason if submitted else "",
            "received_at": _at(req.received_at),
            "submitted_at": _at(req.created_at),
        },
        "deadline": {"due_at": _at(req.due_at), "met": req.completed_at is not None and req.completed_at <= req.due_at},
        "completed_at": _at(req.completed_at),
        "proposal": {
            "inventory": req.inventory_json,
            "inventory_version": req.inventory_version,
            "digest": req.inventory_digest,
        },
        "approvals": [
            {
                "approved_by": a.approved_by,
                "approved_at": _at(a.approved_at),
                "digest": a.inventory_digest,
                "rules_version": a.rules_version,
                "expires_at": _at(a.expires_at),
                "revoked_at": _at(a.revoked_at),
                "preview": a.preview,
            }
            for a in req.approvals.order_by("approved_at", "id")
        ],
        "stages": [
            {
                "stage": s.stage,
                "community_id": s.community_id,
                "status": s.status,
                "operation_id": str(s.operation_id),
                "submitted_at": _at(s.submitted_at),
                "started_at": _at(s.started_at),
                "finished_at": _at(s.finished_at),
                "evidence": s.evidence,
                "attempts": [
                    {
                        "attempt": a.attempt,
                        "executor": a.executor,
                        "generation": a.generation,
                        "started_at": _at(a.started_at),
                        "finished_at": _at(a.finished_at),
                        "outcome": a.outcome,
                        "error": a.error,
                    }
                    for a in attempts.get(s.id, [])
                ],
            }
            for s in stages
        ],
        "remains": remains([s.evidence for s in stages]),
        "cancellation": (
            {"by": req.cancel_requested_by, "at": _at(req.cancel_requested_at), "reason": req.cancel_reason}
            if req.cancel_requested_at
            else None
        ),
        "withdrawals": [
            {"epoch": w.epoch, "cause": w.cause, "at": _at(w.created_at), "acknowledged_at": _at(w.acknowledged_at)}
            for w in req.withdrawals.order_by("epoch")
        ],
        "decisions": [
            {"at": _at(d.created_at), "by": d.actor_label, "action": d.action, "reason": d.reason} for d in decisions
        ],
    }


def remains(evidence: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the receiver's last effect found of the person after everything else, by the dataset file's
    own rules (kept, with the file's reason; anonymized), and what its catalog walk read; None from a
    receiver that walks nothing."""
    walked = [e for e in evidence if "catalog_walk" in e]
    if not walked:
        return None
    return {"by_rule": walked[-1].get("remains", {}), "walk": walked[-1]["catalog_walk"]}


def remains_lines(found: dict[str, Any] | None) -> list[str]:
    """The completeness walk in words."""
    if found is None:
        return []
    walk = found["walk"]
    out = [
        f"remains   checked after the last effect, in its transaction: {walk.get('foreign_key_paths', 0)} "
        f"foreign-key paths into the person's table, {walk.get('identity_columns', 0)} identity columns, "
        f"{walk.get('anonymized_tables_checked', 0)} anonymized tables"
    ]
    if not found["by_rule"]:
        out.append("remains   nothing of the person")
    for where, r in sorted(found["by_rule"].items()):
        how = f"kept: {r['reason']}" if r["rule"] == "keep" else "anonymized as the dataset file says"
        out.append(f"remains   {where}: {r['references']} reference(s) to the person, {how}")
    return out


def of(request_id: Any, now: datetime) -> dict[str, Any]:
    """The sealed proof of one deletion case (`core.proofs.seal`)."""
    return proofs.seal(record(get_request(request_id)), now)


def lines(proof: dict[str, Any]) -> list[str]:
    """The proof as a person reads it, line by line."""
    r = proof["record"]
    asked = r["asked"]
    out = [
        f"Proof of deletion {r['id']}: {r['outcome']}",
        f"asked     delete {asked['target']} for {asked['requested_by']}: {asked['reason'] or '-'}",
        f"          received {asked['received_at']}, submitted {asked['submitted_at']}",
        f"deadline  {r['deadline']['due_at']} ({'met' if r['deadline']['met'] else 'not met or not completed'})",
        f"proposal  digest {r['proposal']['digest']} (inventory version {r['proposal']['inventory_version']})",
    ]
    for a in r["approvals"]:
        revoked = f", revoked {a['revoked_at']}" if a["revoked_at"] else ""
        out.append(f"approval  by {a['approved_by']} at {a['approved_at']} of {a['digest'][:12]}…{revoked}")
    for s in r["stages"]:
        evidence = ", ".join(
            f"{k}={json.dumps(v, sort_keys=True, separators=(',', ':')) if isinstance(v, dict) else v}"
            if k != "receipt"
            else present.receipt(v)
            for k, v in s["evidence"].items()
        )
        evidence = evidence or "no evidence"
        out.append(
            f"stage     {s['stage']} {s['community_id'] or ''} {s['status']} operation {s['operation_id']}"
            f" ({len(s['attempts'])} attempt(s)): {evidence}"
        )
    out += remains_lines(r.get("remains"))
    if r["cancellation"]:
        c = r["cancellation"]
        out.append(f"cancelled by {c['by']} at {c['at']}: {c['reason']}")
    for d in r["decisions"]:
        out.append(f"decision  {d['at']} {d['by']}: {d['action']} {d['reason']}".rstrip())
    out.append(f"completed {r['completed_at'] or '-'}")
    out.append(f"digest    {proof['digest']} (sealed {proof['sealed_at']})")
    out.append(f"signature {proof['signature']} (key {proof['key']})")
    return [proofs.readable(line) for line in out]
