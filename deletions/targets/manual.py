"""A target a person deletes in by hand (a vendor's console): `manual:<system>/<account>`.

It enforces nothing itself: no fence for a stale owner, no data version, no operation applied
once, nothing to look up but what people recorded. So it runs review-only: the worker checks
authority and mints the grant as for any effect, then hands the effect to an operator instead of
sending it (`capabilities`); the operator deletes in the vendor's console and records the outcome
(`record_effect`: applied, with the evidence they saw, or not applied), and `lookup` reads what
they recorded, the only evidence there is.
"""

from __future__ import annotations

import uuid
from typing import Any
from uuid import UUID

from deletions.contract import MANUAL_PREFIX
from deletions.models import OperatorRecord
from deletions.targets.base import Capabilities, Found, Lookup, NotFound, Unreadable

PREFIX = MANUAL_PREFIX
ACCOUNT = uuid.UUID("6d616e75-616c-4000-8000-000000000000")  # uuid5 namespace of the account ids


def account_id(target: str) -> str:
    """The one 'community' of a manual target: the person's account in that system, named by the
    system alone (`manual:crm/…` → the same id for everyone in crm), so the id a reader sees
    says nothing of whose account it is (a function of the target would confirm a guess)."""
    return str(uuid.uuid5(ACCOUNT, target[len(PREFIX) :].split("/", 1)[0]))


def _listed_before(target: str) -> str:
    """The id inventories listed before it was the system's (a function of the whole target):
    a case submitted then still previews its one community."""
    return str(uuid.uuid5(ACCOUNT, target))


class ManualTarget:
    name = "a vendor's console"
    capabilities = Capabilities(
        fences_stale_owners=False, checks_expected_version=False, idempotent_per_operation=False, lookups_can_lag=False
    )

    def inventory(self, target: str, communities: int) -> list[dict[str, str]]:
        return [{"id": account_id(target), "role": "participant"}]

    def preview(self, target: str, community_ids: list[str]) -> dict[str, dict[str, Any]]:
        system = target[len(PREFIX) :].split("/", 1)[0]
        return {
            cid: {
                "id": cid,
                "name": f"the account in {system} (deleted by hand; the operator counts what they remove)",
                "rows": None,  # nobody here can count them: the operator who deletes does
                "agents": None,
                "version": 0,  # nothing to check: this system keeps no data version we can read
            }
            for cid in community_ids
            if cid in (account_id(target), _listed_before(target))
        }

    def fence(self, request_id: UUID) -> int:
        return 0  # it cannot fence: every effect goes through a person instead

    def apply(self, grant: str) -> dict[str, Any]:
        raise NotImplementedError("a manual target is never sent an effect: it is handed to a person")

    def lookup(self, operation_id: UUID) -> Lookup:
        latest = OperatorRecord.objects.filter(operation_id=operation_id).order_by("-recorded_at", "-id").first()
        if latest is None:
            return Unreadable(f"no operator has recorded operation {operation_id} yet")
        if not latest.applied:
            return NotFound(latest.recorded_at)
        return Found(
            {
                "applied_at": latest.recorded_at.isoformat(),
                "recorded_by": latest.recorded_by,
                "evidence": latest.evidence,
                **({} if latest.has_agents is None else {"has_agents": latest.has_agents}),
            }
        )

    def withdraw(self, withdrawal: str) -> int:
        # Nothing is ever sent here, so there is no grant to refuse: a person reads the case first.
        from core import grants

        return int(grants.verify(withdrawal, grants.receiver_key())["epoch"])

    def believed_state(self, evidence: dict[str, Any]) -> tuple[str, str, int] | None:
        return None  # its records are the operators', not a receiver's database

    def where(self) -> str:
        return "the records operators made of what they applied by hand"
