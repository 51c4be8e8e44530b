"""Authority withdrawals (the outbox to the target system) and their acknowledgements."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple
from uuid import UUID

from django.db import connection, transaction

from core import authority
from core.sql import Statements
from deletions.models import LATEST_APPROVAL_SQL
from deletions.store.approvals import APPROVE, SUBMIT
from deletions.store.requests import lock_request

SQL = Statements.beside(__file__, "withdrawals.sql")


class Pending(NamedTuple):
    request_id: UUID
    target: str
    epoch: int


def withdraw(request_id: UUID, *, cause: str, now: datetime) -> int:
    """Record a withdrawal in the caller's transaction (the request is locked); its epoch."""
    with connection.cursor() as cur:
        row = SQL.one(cur, "withdraw", request_id=request_id, cause=cause, now=now)
    assert row is not None
    return int(row[0])


def pending(*, request_id: UUID | None = None, limit: int = 100) -> list[Pending]:
    with connection.cursor() as cur:
        cur.execute(SQL.sql("pending"), {"request_id": request_id, "limit": limit})
        return [Pending(*r) for r in cur.fetchall()]


def acknowledged(p: Pending, *, epoch: int, where: str, now: datetime) -> None:
    with connection.cursor() as cur:
        SQL.run(cur, "acknowledged", request_id=p.request_id, epoch=epoch, where=where, now=now)


def push_failed(p: Pending, *, error: str, now: datetime) -> None:
    with connection.cursor() as cur:
        SQL.run(cur, "push_failed", request_id=p.request_id, epoch=p.epoch, error=error[:2000], now=now)


def lost_authority(*, limit: int = 100) -> list[tuple[UUID, str, bool, str, bool]]:
    """Started, unfinished requests whose current approval's approver or requester no longer holds
    their permission (`core.authority.may_sql`, read now), with no withdrawal since that approval:
    (request, approver, approver may, requester, requester may), oldest approval first."""
    approver_may, approver_params = authority.may_sql("a.approved_by_user_id", APPROVE)
    requester_may, requester_params = authority.may_sql("r.requested_by_user_id", SUBMIT)
    with connection.cursor() as cur:
        cur.execute(
            f"""SELECT r.id, a.approved_by, {approver_may}, r.requested_by, {requester_may}
                FROM entity_deletion_requests r
                JOIN LATERAL (
                    SELECT * FROM entity_deletion_approvals WHERE request_id = r.id
                    ORDER BY {LATEST_APPROVAL_SQL} LIMIT 1
                ) a ON true
                WHERE r.status IN ('running', 'retry_wait', 'needs_attention', 'needs_review')
                  AND a.revoked_at IS NULL
                  AND NOT EXISTS (SELECT 1 FROM entity_deletion_authority_withdrawals w
                                  WHERE w.request_id = r.id AND w.created_at >= a.approved_at)
                  AND (NOT {approver_may} OR NOT {requester_may})
                ORDER BY a.approved_at LIMIT %s""",
            [*approver_params, *requester_params, *approver_params, *requester_params, limit],
        )
        return [(r[0], r[1], bool(r[2]), r[3], bool(r[4])) for r in cur.fetchall()]


def withdraw_locked(request_id: UUID, *, cause: str, now: datetime) -> int:
    """A withdrawal in its own transaction, under the request lock (what a staff decision holds)."""
    with transaction.atomic():
        lock_request(request_id)
        return withdraw(request_id, cause=cause, now=now)
