"""The authority rule the receiving boundary applies with every effect, and the grant it signs. Pure.

A saved "approved" label is not permission: each effect needs a current approval
of the exact stored proposal, not expired or revoked, an approver and a requester
who are still active staff holding their permissions, and a request that is not
cancelled. The first rule that fails names the refusal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deletions.contract import AuthorityFacts, Lease, StageSnapshot


@dataclass(frozen=True)
class Refusal:
    rule: str  # the open question a person answers
    review: bool  # True: back to review; False: cancelled, the next transition ends it
    fault: bool = False  # an integrity fault: the saved records contradict themselves, no approval clears it


def refusal(f: AuthorityFacts) -> Refusal | None:
    if f.cancel_requested or f.status == "cancelled":
        return Refusal("request cancelled: no new effect under its approval", review=False)
    if f.approval_id is None:
        return Refusal("no approval covers this request", review=True)
    if f.approval_revoked_at is not None:
        return Refusal(f"approval revoked at {f.approval_revoked_at:%Y-%m-%d %H:%M:%S} UTC", review=True)
    if f.approval_expires_at is None or f.approval_expires_at <= f.now:
        when = f"{f.approval_expires_at:%Y-%m-%d %H:%M:%S} UTC" if f.approval_expires_at else "(no expiry saved)"
        return Refusal(f"approval expired at {when}", review=True)
    if f.run_digest != f.stored_digest:
        return Refusal(
            f"the inventory this run read (digest {f.run_digest or 'none'}) does not match the saved digest "
            f"{f.stored_digest}",
            review=True,
            fault=True,
        )
    if f.approval_digest != f.stored_digest:
        return Refusal(
            f"approval covers digest {f.approval_digest}, not the stored inventory {f.stored_digest}",
            review=True,
            fault=True,
        )
    if f.approval_inventory_version != f.inventory_version or f.approval_rules_version != f.rules_version:
        return Refusal(
            f"approval was given under inventory v{f.approval_inventory_version} / rules "
            f"v{f.approval_rules_version}, not v{f.inventory_version} / v{f.rules_version}",
            review=True,
        )
    if f.community_id is not None and f.community_id not in f.run_communities:
        return Refusal(f"community {f.community_id} is not in the approved inventory: no effect there", review=True)
    if f.community_id is not None and expected_version(f) is None:
        return Refusal(
            f"the approval saw no data version for community {f.community_id} at the target system; approve again",
            review=True,
        )
    return _people(f)


def _people(f: AuthorityFacts) -> Refusal | None:
    """The people behind the approval may still stand behind an effect: two of them, each active staff
    holding their permission now."""
    if f.same_person:
        return Refusal(f"four eyes: {f.approver} both submitted and approved this request", review=True)
    if not f.approver_may:
        return Refusal(
            f"approver {f.approver} is no longer active staff holding deletions.approve_deletionrequest", review=True
        )
    if not f.requester_may:
        return Refusal(
            f"requester {f.requester} is no longer active staff holding deletions.submit_deletionrequest", review=True
        )
    return None


def reapply_refusal(f: AuthorityFacts) -> Refusal | None:
    """Whether a completed case's effect may be applied again, under the approval that completed it,
    after its receiver's database went back in time (a restore): the approval is there, of the stored
    inventory, not revoked, and its approver and requester still stand behind it (`_people`). Its expiry
    is not asked: every effect it approved landed once, and applying one again re-establishes what it
    approved, nothing new. A refusal hands the effect to a person."""
    if f.approval_id is None:
        return Refusal("no approval covers this request", review=False)
    if f.approval_revoked_at is not None:
        return Refusal(f"approval revoked at {f.approval_revoked_at:%Y-%m-%d %H:%M:%S} UTC", review=False)
    if f.approval_digest != f.stored_digest:
        return Refusal(
            f"approval covers digest {f.approval_digest}, not the stored inventory {f.stored_digest}",
            review=False,
            fault=True,
        )
    return _people(f)


def contradiction(evidence: Any, row: StageSnapshot) -> str:
    """Why the target's evidence cannot be this stage's ("" when it can): it is a record, and
    what it names of the effect (operation, community, action) is this stage's."""
    if not isinstance(evidence, dict):
        return f"the target's evidence for operation {row.operation_id} is no record ({type(evidence).__name__})"
    mine = {"operation_id": str(row.operation_id), "community_id": row.community_id, "action": row.stage}
    for key, value in mine.items():
        if key in evidence and evidence[key] is not None and str(evidence[key]) != str(value):
            return (
                f"the target's evidence for operation {row.operation_id} names {key} {str(evidence[key])[:80]!r}, "
                f"not this stage's {value!r}"
            )
    return ""


def expected_version(f: AuthorityFacts) -> int | None:
    """The data version an effect expects in its community: the later of what the approver saw and
    what the case's own previous effect there reported (a version only moves forward, so the later
    one is the larger)."""
    if f.approved_version is None:
        return None
    return max(f.approved_version, f.previous_version or 0)


def grant(f: AuthorityFacts, *, lease: Lease, row: StageSnapshot, target: str) -> dict[str, Any]:
    """What the back-office signs for one effect that passed `refusal`: good until the approval
    expires or the lease does, whichever is first, and only while the target's minimum authority
    epoch for the request is not past the epoch it carries (`deletions.withdrawals`)."""
    ends = [t for t in (f.approval_expires_at, f.lease_expires_at) if t is not None]
    return {
        "kind": "grant",
        "epoch": f.epoch,
        "operation_id": str(row.operation_id),
        "request_id": str(lease.request_id),
        "action": row.stage,
        "community_id": row.community_id,
        "target": target,
        "generation": lease.generation,
        "executor": lease.owner,
        "approval_id": str(f.approval_id),
        "approved_digest": f.approval_digest,
        "expected_version": expected_version(f),
        # The first effect carries every approved community's data version: the receiver refuses it
        # (source_changed, rules_changed) if anything changed anywhere since, before anything is deleted.
        **({"expected_versions": f.expected_versions} if row.community_id is None and f.expected_versions else {}),
        "issued_at": f.now.isoformat(),
        "not_after": min(ends).isoformat(),
    }


def lost(*, approver: str, approver_may: bool, requester: str, requester_may: bool) -> str:
    """Why authority over a started case is withdrawn when a person behind it lost their permission."""
    if not approver_may:
        return f"approver {approver} no longer holds deletions.approve_deletionrequest"
    return f"requester {requester} no longer holds deletions.submit_deletionrequest"
