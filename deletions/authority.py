"""The authority rule the receiving boundary applies with every effect. Pure.

A saved "approved" label is not permission: each effect needs a current approval
of the exact stored proposal, not expired or revoked, an approver and a requester
who are still active staff holding their permissions, and a request that is not
cancelled. The first rule that fails names the refusal.
"""

from __future__ import annotations

from dataclasses import dataclass

from deletions.contract import AuthorityFacts


@dataclass(frozen=True)
class Refusal:
    rule: str  # the open question a person answers
    review: bool  # True: back to review; False: cancelled, the next transition ends it


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
    if f.recomputed_digest != f.stored_digest:
        return Refusal(
            f"stored inventory digest {f.recomputed_digest} does not match the saved digest {f.stored_digest}",
            review=True,
        )
    if f.approval_digest != f.stored_digest:
        return Refusal(
            f"approval covers digest {f.approval_digest}, not the stored inventory {f.stored_digest}", review=True
        )
    if f.approval_inventory_version != f.inventory_version or f.approval_rules_version != f.rules_version:
        return Refusal(
            f"approval was given under inventory v{f.approval_inventory_version} / rules "
            f"v{f.approval_rules_version}, not v{f.inventory_version} / v{f.rules_version}",
            review=True,
        )
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
