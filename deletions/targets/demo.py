"""The demo target system's adapter: the `demo_target` app in its own database."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from django.db import DatabaseError, connections

from deletions.targets.base import (
    Capabilities,
    Found,
    Lookup,
    NotFound,
    TargetRefused,
    TargetUnreachable,
    Unreadable,
)
from demo_target import system
from demo_target.router import ALIAS

PREFIX = "demo:"


@contextmanager
def _reaching() -> Iterator[None]:
    """A database error reaching the target (a lost connection, a statement timeout, a stopped
    server) is TargetUnreachable; the connection is dropped so the next call connects afresh."""
    try:
        yield
    except DatabaseError as exc:
        if not connections[ALIAS].in_atomic_block:  # (a test's wrapping transaction keeps its own)
            connections[ALIAS].close()
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise TargetUnreachable(f"the demo target system did not answer ({type(exc).__name__}: {first})") from None


class DemoTarget:
    name = "demo target system"
    capabilities = Capabilities(
        fences_stale_owners=True, checks_expected_version=True, idempotent_per_operation=True, lookups_can_lag=True
    )

    def inventory(self, target: str, communities: int) -> list[dict[str, str]]:
        with _reaching():
            return system.memberships(target, communities)

    def preview(self, target: str, community_ids: list[str]) -> dict[str, dict[str, Any]]:
        with _reaching():
            system.enroll(target)
            return system.preview(target, community_ids)

    def fence(self, request_id: UUID) -> int:
        with _reaching():
            return system.fence(request_id)

    def apply(self, grant: str) -> dict[str, Any]:
        try:
            with _reaching():
                return system.apply(grant)
        except system.Refused as exc:
            raise TargetRefused(exc.kind, exc.message) from None

    def lookup(self, operation_id: UUID) -> Lookup:
        try:
            with _reaching():
                answer = system.lookup(operation_id)
        except TargetUnreachable as exc:
            return Unreadable(exc.message)
        except system.Unreadable as exc:
            return Unreadable(str(exc))
        except system.Refused as exc:
            raise TargetRefused(exc.kind, exc.message) from None
        if isinstance(answer, system.Found):
            return Found(answer.evidence)
        return NotFound(answer.watermark)

    def withdraw(self, withdrawal: str) -> int:
        try:
            with _reaching():
                return system.withdraw(withdrawal)
        except system.Refused as exc:
            raise TargetRefused(exc.kind, exc.message) from None

    def where(self) -> str:
        s = connections[ALIAS].settings_dict
        return f"the demo target database {s['NAME']}"
