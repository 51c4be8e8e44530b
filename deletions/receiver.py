"""The trusted action service: every deletion effect lands through here.

One transaction (a) locks the request row and checks the lease owner and
generation, (b) has the target system check the fencing token and the
operation id, (c) rechecks authority (`deletions.authority.refusal`) and
(d) applies the effect. Any failed check applies nothing and names the rule:
a check followed by a separate update would leave a gap.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction

from deletions import authority, target_system
from deletions.contract import Lease, StageSnapshot
from deletions.errors import Refused
from deletions.rules.workflow import RULES_VERSION
from deletions.store import approvals


class AuthorityRefused(Refused):
    def __init__(self, refusal: authority.Refusal, approval_id: Any) -> None:
        super().__init__(f"refused at the receiving boundary: {refusal.rule}")
        self.refusal = refusal
        self.approval_id = approval_id


def apply_effect(lease: Lease, row: StageSnapshot, *, outcome: dict[str, Any], now: datetime) -> dict[str, Any]:
    """What the target system recorded for this operation (its first outcome when repeated)."""
    with transaction.atomic():
        facts = approvals.lock_for_effect(lease, now=now, rules_version=RULES_VERSION)
        refused = authority.refusal(facts)
        if refused is not None:
            raise AuthorityRefused(refused, facts.approval_id)
        return target_system.apply(
            operation_id=row.operation_id,
            request_id=lease.request_id,
            generation=lease.generation,
            executor=lease.owner,
            action=row.stage,
            community_id=row.community_id,
            outcome=outcome,
            now=now,
        )
