"""Re-applications after a restore (`models.DeletionReapplication`): the only writer. Each is written
before its effect is sent (`begin`, once per first operation: the unique key says no to a second) and
answered once (`answer`: the trigger refuses any other change); and the authority a re-application is
decided from, read in one statement (`authority`)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection

from core import authority as core_authority
from core.sql import Statements
from deletions.contract import AuthorityFacts
from deletions.models import LATEST_APPROVAL_SQL, DeletionReapplication
from deletions.store.approvals import APPROVE, SUBMIT

SQL = Statements.beside(__file__, "reapplications.sql")


def begin(
    *, request_id: UUID, stage_id: UUID, first: UUID, operation_id: UUID, generation: int, because: str, now: datetime
) -> DeletionReapplication:
    """The re-application of the stage's effect (first operation `first`) under the new `operation_id`,
    written before it is sent; the one written before when there is one."""
    with connection.cursor() as cur:
        SQL.one(
            cur,
            "begin",
            id=uuid.uuid4(),
            request_id=request_id,
            stage_id=stage_id,
            first_operation_id=first,
            operation_id=operation_id,
            generation=generation,
            because=because,
            now=now,
        )
    return DeletionReapplication.objects.get(first_operation_id=first)


def answer(row: DeletionReapplication, said: dict[str, Any]) -> bool:
    """Its answer (`{"outcome": ..., "at": ..., "evidence" | "said": ...}`), once; whether this wrote it."""
    with connection.cursor() as cur:
        return SQL.one(cur, "answer", id=row.id, answer=json.dumps(said, sort_keys=True, default=str)) is not None


def authority(request_id: UUID, *, now: datetime, rules_version: int) -> AuthorityFacts:
    """What `deletions.authority.reapply_refusal` decides from, read now in one statement: the case's
    latest approval and whether its approver and requester are active staff holding their permissions
    (`core.authority.may_sql`), the stored digest, and the request's authority epoch."""
    approver_may, approver_params = core_authority.may_sql("a.approved_by_user_id", APPROVE)
    requester_may, requester_params = core_authority.may_sql("r.requested_by_user_id", SUBMIT)
    with connection.cursor() as cur:
        cur.execute(
            f"""SELECT r.status, r.inventory_digest, r.inventory_version, r.requested_by,
                       a.id, a.inventory_digest, a.inventory_version, a.rules_version, a.revoked_at, a.approved_by,
                       r.requested_by_user_id = a.approved_by_user_id, {approver_may}, {requester_may},
                       (SELECT coalesce(max(w.epoch), 0) FROM entity_deletion_authority_withdrawals w
                        WHERE w.request_id = r.id)
                FROM entity_deletion_requests r
                LEFT JOIN LATERAL (
                    SELECT * FROM entity_deletion_approvals WHERE request_id = r.id
                    ORDER BY {LATEST_APPROVAL_SQL} LIMIT 1
                ) a ON true
                WHERE r.id = %s""",
            [*approver_params, *requester_params, request_id],
        )
        row = cur.fetchone()
    assert row is not None, request_id
    status, digest, version, requester, approval_id, approval_digest, approval_version, approval_rules = row[:8]
    return AuthorityFacts(
        now=now,
        status=status,
        cancel_requested=False,
        stored_digest=digest,
        inventory_version=version,
        rules_version=rules_version,
        approval_id=approval_id,
        approval_digest=approval_digest,
        approval_inventory_version=approval_version,
        approval_rules_version=approval_rules,
        approval_expires_at=None,
        approval_revoked_at=row[8],
        approver=row[9] or "",
        approver_may=bool(row[11]),
        requester=requester,
        requester_may=bool(row[12]),
        same_person=bool(row[10]),
        epoch=int(row[13]),
    )
