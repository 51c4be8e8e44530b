"""The back-office's side of the receiving boundary: the grant for one effect.

One case-database statement (its own transaction) locks the request, checks the lease owner and
generation, and reads the latest approval and the people behind it; the pure rule
(`deletions.authority.refusal`) decides from what it read and from the inventory the run acts on
(its plan's digest and communities, as the run's claim read them), and only then is a grant signed, naming
the operation, the lease generation, the approval, the community and the data version expected
there, good until the approval or the lease ends. The target system checks the grant again in
the transaction that applies the effect (`deletions.targets`), so a check here followed by a
separate update leaves no gap a stale or unauthorized effect could use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core import grants
from deletions import authority
from deletions.contract import Lease, StageSnapshot
from deletions.errors import Refused
from deletions.rules.workflow import RULES_VERSION, Plan
from deletions.store import approvals


class AuthorityRefused(Refused):
    def __init__(self, refusal: authority.Refusal, approval_id: Any) -> None:
        super().__init__(f"refused at the receiving boundary: {refusal.rule}")
        self.refusal = refusal
        self.approval_id = approval_id


@dataclass(frozen=True)
class Grant:
    token: str
    payload: dict[str, Any]
    approval_id: Any


def grant(lease: Lease, row: StageSnapshot, plan: Plan, *, now: datetime) -> Grant:
    """A signed grant for this stage's effect in the run's plan, or AuthorityRefused (nothing to send)."""
    read = approvals.lock_for_effect(lease, row, now=now, rules_version=RULES_VERSION)
    # The inventory the run acts on, as its claim read it: the rule compares it with what was read now.
    facts = dataclasses.replace(read, run_digest=plan.digest, run_communities=plan.position)
    refused = authority.refusal(facts)
    if refused is not None:
        raise AuthorityRefused(refused, facts.approval_id)
    payload = authority.grant(facts, lease=lease, row=row, target=plan.target)
    return Grant(token=grants.sign(payload), payload=payload, approval_id=facts.approval_id)
