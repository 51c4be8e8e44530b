"""Authority withdrawn from a request reaches the target system, and is acknowledged there.

A revocation or a cancellation (or, found by the dispatcher's tick, a person behind the current
approval losing their permission) records a withdrawal (`store.withdrawals.withdraw`) in its own
transaction: the request's authority epoch moves on, and every grant minted from then on carries
the new epoch. A grant minted before may already be on its way; the target refuses it once it
enforces the new minimum epoch. `push` signs each unacknowledged withdrawal and sends it to the
request's target system (on the decision's commit, and again by every dispatcher tick until the
target acknowledges it); the case shows when the target acknowledged it. Between the decision
and the acknowledgement, a grant minted before can still land: at most one grant's lifetime
(the lease, `DELETION_LEASE_SECONDS`), since a grant is good no longer than the lease it was
minted under.
"""

from __future__ import annotations

import logging
from datetime import datetime
from uuid import UUID

from core import grants
from core.logs import event
from deletions import authority, targets
from deletions.store import withdrawals as store

logger = logging.getLogger("deletions")


def withdraw_lost_authority(*, now: datetime) -> int:
    """A person whose approval or request a started case runs under lost their permission (or stopped
    being active staff): authority over the case is withdrawn, as a revocation would, and told to the
    target by the next push. Run by every dispatcher tick; each grant is rechecked anyway."""
    lost = store.lost_authority()
    for request_id, approver, approver_may, requester, requester_may in lost:
        why = authority.lost(
            approver=approver, approver_may=approver_may, requester=requester, requester_may=requester_may
        )
        epoch = store.withdraw_locked(request_id, cause=why, now=now)
        event(logger, "authority_lost", level=logging.WARNING, request_id=request_id, reason=f"epoch {epoch}: {why}")
    return len(lost)


def push(*, now: datetime, request_id: UUID | None = None, limit: int = 100) -> int:
    """Send the latest unacknowledged withdrawal of each request (of one, when named); how many
    the target acknowledged. A target that cannot be told now keeps it for the next push."""
    acknowledged = 0
    for p in store.pending(request_id=request_id, limit=limit):
        target = targets.for_target(p.target)
        token = grants.sign(
            {"kind": "withdrawal", "request_id": str(p.request_id), "epoch": p.epoch, "issued_at": now.isoformat()}
        )
        try:
            enforced = target.withdraw(token)
        except Exception as exc:  # unreachable, timed out, refused: kept, retried by the next push
            store.push_failed(p, error=f"{type(exc).__name__}: {exc}", now=now)
            event(
                logger,
                "withdrawal_unacknowledged",
                level=logging.WARNING,
                request_id=p.request_id,
                reason=f"epoch {p.epoch} not acknowledged by {target.where()}: {type(exc).__name__}: {exc}",
            )
            continue
        store.acknowledged(p, epoch=enforced, where=target.where(), now=now)
        acknowledged += 1
    return acknowledged
