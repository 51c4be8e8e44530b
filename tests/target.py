"""The demo application's tables as the tests read and write them, in SQL on its test database (alias
`target`): what a person holds there, and what the application does (they write more, their agents go).
The receiver's own records (fences, operations) are read in its schema `receiver`."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db import connections, transaction

from receiver.dataset.compile import load, own_records_id
from samples.demo import seed
from samples.demo.seed import COMMUNITY_B, COMMUNITY_C  # noqa: F401  (the tests' communities)

ALIAS = "target"
# Their own records, the last place of every demo person's inventory: nothing of theirs is kept there,
# but its purge_db is the effect the completeness walk runs in.
OWN_RECORDS = own_records_id(load(seed.SCHEMA.with_name("dataset.yaml"))["dataset"])
# What a test leaves in the demo application and the receiver's records; the dataset installed stays.
TABLES = (
    "posts, agents, memberships, communities, people, receiver.receiver_fences, receiver.receiver_operations, "
    "receiver.receiver_people, receiver.receiver_versions, receiver.receiver_call_nonces"
)


class Router:
    """No migration of the back-office runs in the demo application's database."""

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return False if db == ALIAS else None


def _write(fn: Any, *args: Any) -> dict[str, Any]:
    with transaction.atomic(using=ALIAS), connections[ALIAS].cursor() as cur:
        fn(cur, *args)
        return seed.show(cur, args[0])


def enroll(target: str, communities: int = 2) -> dict[str, Any]:
    """The person, enrolled as the first inventory of them would (B and C, or more)."""
    return _write(seed.enroll, target, communities)


def add_rows(target: str, community: UUID | str, rows: int) -> dict[str, Any]:
    return _write(seed.add_rows, target, UUID(str(community)), rows)


def set_agents(target: str, community: UUID | str, agents: int) -> dict[str, Any]:
    return _write(seed.set_agents, target, UUID(str(community)), agents)


def show(target: str) -> dict[str, Any]:
    """Per community: id, name, membership, rows, agents and the data version the receiver keeps (None
    before any preview); and whether a deletion passed the gate."""
    with connections[ALIAS].cursor() as cur:
        shown = seed.show(cur, target)
        cur.execute(
            "SELECT v.community_id::text, v.version, p.gated_at IS NOT NULL FROM receiver.receiver_people p "
            "LEFT JOIN receiver.receiver_versions v ON v.person_pk = p.person_pk WHERE p.person_key = %s",
            [target],
        )
        found = cur.fetchall()
    versions = {cid: version for cid, version, _ in found}
    communities = [{**c, "version": versions.get(c["id"])} for c in shown["communities"]]
    return {**shown, "communities": communities, "gated": any(gated for *_, gated in found)}


def at_target(target: str) -> dict[str, dict[str, Any]]:
    """Community id -> what `show` says of it."""
    return {c["id"]: c for c in show(target)["communities"]}


def operations(request_id: Any = None) -> list[tuple[Any, ...]]:
    """The receiver's records: (operation id, action, community id, generation, evidence), oldest first."""
    sql = "SELECT operation_id, action, community_id, generation, evidence FROM receiver.receiver_operations"
    where = (" WHERE request_id = %s", [request_id]) if request_id else ("", [])
    with connections[ALIAS].cursor() as cur:
        cur.execute(sql + where[0] + " ORDER BY applied_at", where[1])
        return list(cur.fetchall())


def fence(request_id: Any) -> dict[str, Any] | None:
    """A request's fence at the receiver (generation, min_epoch, epoch_raised_at), or None."""
    with connections[ALIAS].cursor() as cur:
        cur.execute(
            "SELECT generation, min_epoch, epoch_raised_at FROM receiver.receiver_fences WHERE request_id = %s",
            [request_id],
        )
        row = cur.fetchone()
    return dict(zip(("generation", "min_epoch", "epoch_raised_at"), row, strict=True)) if row else None


def reset() -> None:
    """Every row a test left (a transactional test commits): the next starts from no demo person."""
    with connections[ALIAS].cursor() as cur:
        cur.execute(f"TRUNCATE {TABLES} RESTART IDENTITY")
