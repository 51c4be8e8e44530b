"""Approval evidence and the parent status, saved together."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import connection, transaction

from core import authority, present
from deletions.contract import AuthorityFacts, Custody, Lease, StageSnapshot
from deletions.errors import UnknownRequest
from deletions.models import LATEST_APPROVAL_FIRST, LATEST_APPROVAL_SQL, DeletionApproval, DeletionRequest, Status
from deletions.store.leases import check_owner


def expire_if_due(
    *, request_id: UUID, latest_expiry: datetime | None, now: datetime, custody: Callable[[str, datetime], Custody]
) -> str | None:
    """An approved, unstarted request whose approval expired goes back to submitted.

    Returns the refusal to report, or None when the approval still holds. `latest_expiry` is the
    latest approval's, as the caller read it (the claim returns it: `leases.claim_run`): unexpired,
    nothing more is read; expired, it is checked again under the request lock, and
    `custody(approver, expires_at)` says who holds the case then.
    """
    if latest_expiry is None or latest_expiry > now:
        return None
    with transaction.atomic():
        req = DeletionRequest.objects.select_for_update().filter(id=request_id, status=Status.APPROVED).first()
        if req is None or req.stages.exists():
            return None  # a started request is checked where each effect lands (receiver.apply_effect)
        approval = latest(req)
        if approval is None or approval.expires_at is None or approval.expires_at > now:
            return None
        req.return_to_review()
        _hold(req, custody(approval.approved_by, approval.expires_at))
        req.last_action = "approval expired; back in review"
        req.updated_at = now
        req.save(update_fields=["status", "owner", "open_question", "next_check_at", "last_action", "updated_at"])
        return (
            f"approval of request {req.id} by {approval.approved_by} expired at "
            f"{present.absolute(approval.expires_at)}; the request is back in review and nothing was applied"
        )


def save_approval(
    req: DeletionRequest,
    *,
    approved_by: Any,
    digest: str,
    rules_version: int,
    now: datetime,
    ttl: timedelta,
    custody: Custody,
    preview: dict[str, dict[str, Any]],
) -> DeletionApproval:
    """Save one approval of the exact proposal and move the locked request to approved, together."""
    username = approved_by.get_username()
    approval = DeletionApproval.objects.create(
        request=req,
        approved_by=username,
        approved_by_user=approved_by,
        approved_at=now,
        inventory_digest=digest,
        inventory_version=req.inventory_version,
        rules_version=rules_version,
        expires_at=now + ttl,
        preview=preview,
    )
    req.approve()
    _hold(req, custody)
    req.last_action = f"approved by {username}"
    req.updated_at = now
    req.save(update_fields=["status", "owner", "open_question", "next_check_at", "last_action", "updated_at"])
    return approval


def revoke(req: DeletionRequest, approval: DeletionApproval, *, by: str, now: datetime, custody: Custody) -> None:
    """The approval no longer covers anything; an unstarted request goes back to submitted,
    a started one is stopped where its next effect lands (the receiver refuses it)."""
    approval.revoked_at = now
    approval.save(update_fields=["revoked_at"])
    fields = ["last_action", "updated_at", "owner", "open_question", "next_check_at"]
    if req.status == Status.APPROVED and not req.stages.exists():
        req.return_to_review()
        fields.append("status")
    _hold(req, custody)
    req.last_action = f"approval revoked by {by}"
    req.updated_at = now
    req.save(update_fields=fields)


def _hold(req: DeletionRequest, custody: Custody) -> None:
    """Who holds the case, what it asks and when it is looked at next, as decided (`rules.custody`)."""
    req.owner, req.open_question, req.next_check_at = custody.owner, custody.open_question, custody.next_check_at


def latest(req: DeletionRequest) -> DeletionApproval | None:
    return req.approvals.order_by(*LATEST_APPROVAL_FIRST).first()


APPROVE = "deletions.approve_deletionrequest"
SUBMIT = "deletions.submit_deletionrequest"


def lock_for_effect(lease: Lease, stage: StageSnapshot, *, now: datetime, rules_version: int) -> AuthorityFacts:
    """Lock the request, check the lease and read what the receiving boundary rechecks, in one
    statement, its own transaction (the grant is decided from what it read): the latest approval,
    whether its approver and the requester are, now, active staff holding their permissions
    (`core.authority.may_sql`), the saved inventory digest, the data versions its grant may expect
    there, and the request's authority epoch (how many withdrawals it has seen). For the first stage (no
    community: the gate) also every approved community's data version, as the approval's preview saved it,
    so the first effect stops the case if anything changed anywhere since; the other stages do not read
    the preview, so their statement costs the same whatever its size.

    The inventory itself is not read again: the run acts on its plan, read by its claim and digested
    once (`leases.claim_run`), and the receiver lays the plan's digest and communities over these
    facts for the rule to compare. So the statement costs the same whatever the inventory's size."""
    gate = stage.community_id is None  # the first effect checks every approved community's version
    approver_may, approver_params = authority.may_sql("a.approved_by_user_id", APPROVE)
    requester_may, requester_params = authority.may_sql("r.requested_by_user_id", SUBMIT)
    with connection.cursor() as cur:
        cur.execute(
            f"""SELECT r.lease_owner, r.lease_generation, r.status, r.cancel_requested_at IS NOT NULL,
                       r.inventory_digest, r.inventory_version, r.requested_by,
                       a.id, a.inventory_digest, a.inventory_version, a.rules_version, a.expires_at, a.revoked_at,
                       a.approved_by, r.requested_by_user_id = a.approved_by_user_id,
                       {approver_may}, {requester_may},
                       (a.preview -> %s::text ->> 'version')::bigint,
                       (p.metadata_json->'result'->>'version_after')::bigint, r.lease_expires_at,
                       (SELECT coalesce(max(w.epoch), 0) FROM entity_deletion_authority_withdrawals w
                        WHERE w.request_id = r.id),
                       CASE WHEN %s THEN (SELECT jsonb_object_agg(e.key, e.value -> 'version')
                                          FROM jsonb_each(a.preview) e) END
                FROM entity_deletion_requests r
                LEFT JOIN LATERAL (
                    SELECT * FROM entity_deletion_approvals WHERE request_id = r.id
                    ORDER BY {LATEST_APPROVAL_SQL} LIMIT 1
                ) a ON true
                LEFT JOIN entity_deletion_stage_history c ON c.id = %s AND c.request_id = r.id
                LEFT JOIN entity_deletion_stage_history p
                    ON p.id = (c.metadata_json->>'previous_stage_id')::uuid AND p.request_id = r.id
                   AND p.target_community_id = c.target_community_id AND p.status = 'completed'
                WHERE r.id = %s FOR UPDATE OF r""",
            [*approver_params, *requester_params, stage.community_id, gate, stage.id, lease.request_id],
        )
        row = cur.fetchone()
    if row is None:
        raise UnknownRequest(f"no deletion request with id {lease.request_id}")
    (owner, generation, status, cancel_requested, digest, version, requester) = row[:7]
    check_owner(lease, owner, generation)
    (approval_id, approval_digest, approval_version, approval_rules, expires, revoked, approver) = row[7:14]
    return AuthorityFacts(
        now=now,
        status=status,
        cancel_requested=cancel_requested,
        stored_digest=digest,
        inventory_version=version,
        rules_version=rules_version,
        approval_id=approval_id,
        approval_digest=approval_digest,
        approval_inventory_version=approval_version,
        approval_rules_version=approval_rules,
        approval_expires_at=expires,
        approval_revoked_at=revoked,
        approver=approver or "",
        approver_may=row[15],
        requester=requester,
        requester_may=row[16],
        same_person=bool(row[14]),
        community_id=stage.community_id,
        approved_version=row[17],
        previous_version=row[18],
        lease_expires_at=row[19],
        epoch=row[20],
        expected_versions=_versions(row[21]) if gate else None,
    )


def _versions(saved: Any) -> dict[str, int]:
    """Each approved community's data version, as the approval's preview saved it (one it saved none for
    is left out: the receiver refuses a first effect that does not name every community's)."""
    if isinstance(saved, str):
        saved = json.loads(saved)
    return {str(k): v for k, v in (saved or {}).items() if isinstance(v, int) and not isinstance(v, bool)}
