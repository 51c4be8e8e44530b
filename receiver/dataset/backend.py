"""The dataset receiver's backend: the same six answers as the demo target system's
(`demo_target.system`), read and applied in an application's own database through the objects
`python -m receiver install` put in its schema `receiver`. The grant is checked as the demo checks
it (signature, kind, not-after; then everything else inside `receiver.apply`)."""

from __future__ import annotations

import json
from datetime import datetime
from functools import cache
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connections
from django.utils import timezone

from core import grants
from core.sql import Statements
from demo_target import system
from demo_target.router import ALIAS
from receiver.dataset import compile

SQL = Statements.beside(__file__, "backend.sql")
Refused, Unreadable, Found, NotFound = system.Refused, system.Unreadable, system.Found, system.NotFound


@cache
def dataset() -> dict[str, Any]:
    return compile.load(str(getattr(settings, "RECEIVER_DATASET", "")))


def name() -> str:
    return f"dataset {dataset()['dataset']} (version {dataset()['version']})"


def check_installed() -> None:
    """Refuse to serve a dataset file other than the one installed (a changed file is installed again)."""
    with connections[ALIAS].cursor() as cur:
        row = SQL.one(cur, "installed", dataset=dataset()["dataset"])
    if row is None or row[1] != compile.digest(dataset()):
        raise compile.Refused(
            f"dataset {dataset()['dataset']}: this file is not what is installed in the database; run "
            "`python -m receiver install` with it first"
        )


def _rows(handle: str) -> list[tuple[Any, ...]]:
    with connections[ALIAS].cursor() as cur:
        cur.execute(SQL.sql("preview"), {"handle": handle})
        return list(cur.fetchall())


def enroll(handle: str) -> None:
    """(The preview enrolls the person: a version row per community.)"""


def memberships(handle: str, communities: int = 2) -> list[dict[str, str]]:
    """The person's communities; refused, with the counts, when one holds more rows than one effect may
    change (`RECEIVER_MAX_ROWS`): such a person is handled apart, never half-applied."""
    found = _rows(handle)
    limit = int(getattr(settings, "RECEIVER_MAX_ROWS", 100_000))
    big = [(n, rows + agents) for _, n, _, rows, agents, _ in found if rows + agents > limit]
    if big:
        said = ", ".join(f"{count:,} in {n}" for n, count in big)
        raise system.Refused(f"{handle} has more rows than one effect may change here ({said}; the limit is {limit:,})")
    return [{"id": str(cid), "role": role} for cid, _, role, _, _, _ in found]


def preview(handle: str, community_ids: list[str]) -> dict[str, dict[str, Any]]:
    wanted = set(community_ids)
    return {
        str(cid): {"id": str(cid), "name": n, "membership": role, "rows": rows, "agents": agents, "version": version}
        for cid, n, role, rows, agents, version in _rows(handle)
        if str(cid) in wanted
    }


def fence(request_id: UUID) -> int:
    with connections[ALIAS].cursor() as cur:
        row = SQL.one(cur, "fence", request_id=request_id)
    return int(row[0]) if row else 0


def withdraw(token: str) -> int:
    try:
        w = grants.verify(token, grants.receiver_key())
    except grants.BadGrant as exc:
        raise system.Tampered(f"withdrawal refused: {exc}") from None
    if w.get("kind") != "withdrawal":
        raise system.Tampered("withdrawal refused: a grant is not a withdrawal")
    with connections[ALIAS].cursor() as cur:
        row = SQL.one(cur, "withdraw", request_id=UUID(w["request_id"]), epoch=int(w["epoch"]), now=timezone.now())
    assert row is not None
    return int(row[0])


def apply(token: str) -> dict[str, Any]:
    return system.apply(token, sql=SQL)


def lookup(operation_id: UUID) -> system.Found | system.NotFound:
    watermark: datetime = timezone.now()
    with connections[ALIAS].cursor() as cur:
        row = SQL.one(cur, "lookup", operation_id=operation_id, watermark=watermark)
    if row is None:
        return system.NotFound(watermark)
    _, evidence, grant, applied_at = row
    made_by = system._made_by(grant)
    system._check_matches(grant, operation_id, applied_at, {**made_by, "operation_id": str(operation_id)})
    return system.Found(json.loads(evidence) if isinstance(evidence, str) else evidence)
