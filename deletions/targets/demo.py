"""The demo target system's adapter: the `demo_target` app in its own database."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db import connections

from deletions.targets.base import Capabilities, Found, Lookup, NotFound, TargetRefused, Unreadable
from demo_target import system
from demo_target.router import ALIAS

PREFIX = "demo:"


class DemoTarget:
    name = "demo target system"
    capabilities = Capabilities(
        fences_stale_owners=True, checks_expected_version=True, idempotent_per_operation=True, lookups_can_lag=True
    )

    def inventory(self, target: str, communities: int) -> list[dict[str, str]]:
        return system.memberships(target, communities)

    def preview(self, target: str, community_ids: list[str]) -> dict[str, dict[str, Any]]:
        system.enroll(target)
        return system.preview(target, community_ids)

    def fence(self, request_id: UUID) -> int:
        return system.fence(request_id)

    def apply(self, grant: str) -> dict[str, Any]:
        try:
            return system.apply(grant)
        except system.Refused as exc:
            raise TargetRefused(exc.kind, exc.message) from None

    def lookup(self, operation_id: UUID) -> Lookup:
        try:
            answer = system.lookup(operation_id)
        except system.Unreadable as exc:
            return Unreadable(str(exc))
        except system.Refused as exc:
            raise TargetRefused(exc.kind, exc.message) from None
        if isinstance(answer, system.Found):
            return Found(answer.evidence)
        return NotFound(answer.watermark)

    def where(self) -> str:
        s = connections[ALIAS].settings_dict
        return f"the demo target database {s['NAME']}"
