"""A deletion case's proof: what was asked and by whom, the approved proposal and its digest, every
approval and revocation, every stage with its operation id, attempts and the target system's
evidence, the cancellation, the withdrawals and the decision log, as one record `core.proofs` seals.

A stage's evidence in the proof is what its receipt says (`receipts.believe`), with the receipt, and
the record carries the receiver's public key for each key id its receipts name: `--verify` checks
every receipt against it (`receipts_fault`) as well as the back-office's signature over the whole. No
proof is issued over a stage whose saved evidence is not what its receipt says (`of` refuses, naming
the stage and the fields, and the case's integrity alarm is raised).

Read only; the same record prints as text (`lines`) and on the admin's printable page."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from core import present, proofs
from deletions import case, evidence, reapply, receipts, targets
from deletions.contract import StageSnapshot, chain_order
from deletions.errors import Refused
from deletions.models import DeletionReapplication, DeletionRequest
from deletions.selectors import case_stages, get_request


def _at(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def record(
    req: DeletionRequest, stages: list[StageSnapshot] | None = None, checked: evidence.CaseEvidence | None = None
) -> dict[str, Any]:
    """The case as its proof says it; each stage's evidence as believed (`checked`, else read now)."""
    stages = chain_order(case_stages(req.id) if stages is None else stages)
    if checked is None:
        checked = evidence.believed(req.target, stages, req.id)
    beliefs = checked.beliefs
    attempts = case.attempts_by_stage(list(req.attempts.order_by("started_at", "attempt")))
    decisions = list(req.decisions.order_by("created_at", "id"))
    submitted = next((d for d in decisions if d.action == "submit"), None)
    again: dict[Any, list[DeletionReapplication]] = {}
    for row in req.reapplications.order_by("created_at", "id"):
        again.setdefault(row.stage_id, []).append(row)
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
                "believed": beliefs[s.id].how,
                "evidence": beliefs[s.id].evidence,
                "reapplied": reapplied(again.get(s.id, []), checked.keys),
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
        "receivers": checked.cited(),
        "remains": remains([beliefs[s.id].evidence for s in stages]),
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


def reapplied(rows: list[DeletionReapplication], keys: dict[str, str] | None) -> list[dict[str, Any]]:
    """A stage's effect applied again after its receiver's database was restored: the new operation, what
    came of it, and the receiver's new evidence as its receipt says (`receipts.believe`), linked to the first."""
    out = []
    for row in rows:
        answer = row.answer or {}
        belief = receipts.believe(answer["evidence"], keys) if "evidence" in answer else None
        out.append(
            {
                "said": reapply.SAID
                if answer.get("outcome") == reapply.APPLIED
                else answer.get("said", "not answered"),
                "first_operation_id": str(row.first_operation_id),
                "operation_id": str(row.operation_id),
                "because": row.because,
                "at": answer.get("at"),
                "outcome": answer.get("outcome"),
                "believed": belief.how if belief else receipts.NONE,
                "evidence": belief.evidence if belief else {},
            }
        )
    return out


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
    """The sealed proof of one deletion case (`core.proofs.seal`); refused, naming each stage and field,
    when a stage's saved evidence is not what its receipt says (the case's integrity alarm raised)."""
    req = get_request(request_id)
    stages = case_stages(req.id)
    checked = evidence.of_case(req, stages, now)
    if checked.faults:
        raise Refused(f"no proof of deletion {req.id} is issued: {receipts.FAULT}: {checked.said(values=True)}")
    return proofs.seal(record(req, stages, checked), now)


def receipts_fault(r: dict[str, Any]) -> str:
    """Why the receipts a proof's record carries do not hold, or "": each stage's evidence is what its
    receipt says, verified against the receiver's public key the record carries for the key id it
    names; evidence without a receipt only from a manual target (an operator's record). What a
    `--verify` checks besides the back-office's signature, so it holds even if that key signed an
    edited record."""
    carried = r.get("receivers")
    keys = {str(k): str(v) for k, v in carried.items()} if isinstance(carried, dict) else {}
    asked = r.get("asked")
    target = str(asked.get("target", "")) if isinstance(asked, dict) else ""
    by_hand = targets.keys_in(target, []) is None
    stages = r.get("stages")
    for s in stages if isinstance(stages, list) else []:
        if not isinstance(s, dict):
            return "a stage of the proof is not a record"
        again = s.get("reapplied")
        for said, operation in [
            (s.get("evidence"), s.get("operation_id")),
            *((a.get("evidence"), a.get("operation_id")) for a in (again if isinstance(again, list) else [])),
        ]:
            if not said:
                continue  # nothing claimed (not completed, or the evidence dropped past its period)
            belief = receipts.believe(said, None if by_hand else keys)
            if belief.fault:
                place = receipts.where(str(s.get("stage")), s.get("community_id"), operation)
                return f"stage {place}: its evidence is not what its receipt says: {belief.said(values=True)}"
    return ""


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
    for kid, key in sorted((r.get("receivers") or {}).items()):
        out.append(f"receiver  key {kid}: {key} (each receipt under it is checked with it)")
    for s in r["stages"]:
        said = ", ".join(
            f"{k}={json.dumps(v, sort_keys=True, separators=(',', ':')) if isinstance(v, dict) else v}"
            if k != "receipt"
            else present.receipt(v)
            for k, v in s["evidence"].items()
        )
        if said and s.get("believed") == receipts.BY_HAND:
            said = f"recorded by an operator, no receipt: {said}"
        out.append(
            f"stage     {s['stage']} {s['community_id'] or ''} {s['status']} operation {s['operation_id']}"
            f" ({len(s['attempts'])} attempt(s)): {said or 'no evidence'}"
        )
        for a in s.get("reapplied", []):
            receipt = present.receipt(a["evidence"]["receipt"]) if a["evidence"].get("receipt") else "no receipt"
            out.append(f"again     operation {a['operation_id']} at {a['at']}: {a['said']} ({a['because']}); {receipt}")
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
