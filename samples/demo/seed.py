"""The demo application's people, as the application itself writes them: `python -m samples.demo.seed
[HANDLE ...]` creates its tables when missing (schema.sql) and enrolls the people named (by default the
README's tour: alice, bob, carol, dave, erin, frank, grace and heidi), in the receiver's database
(`RECEIVER_DATABASE_URL`; in development the embedded server's, as `python -m receiver` reads it).

`python -m samples.demo.seed show|add-rows|set-agents ...` reads or changes one person's data as the
application would (the tutorials' "the person wrote more", "their agents are gone").

Every function takes a DB-API cursor (psycopg's or Django's) of that database and writes in the
caller's transaction. A person is enrolled with B (participant), C (former participant) and, when
asked for more, further communities with fixed ids, each with a few posts and agents; the counts are
fixed by the handle, so a person has the same data every time they are enrolled.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

SCHEMA = Path(__file__).with_name("schema.sql")
COMMUNITY_B = UUID("00000000-0000-0000-0000-00000000000b")
COMMUNITY_C = UUID("00000000-0000-0000-0000-00000000000c")
NAMES = {COMMUNITY_B: "Community B (demo)", COMMUNITY_C: "Community C (demo)"}
TOUR = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi")  # the README's people
PREFIX = "demo:"
MAX_HANDLE = 210  # schema.sql's CHECK on people.handle
MAX_ROWS = 10_000  # what one add-rows or set-agents writes at most


class Refused(Exception):
    """Nothing was written; the message says why in one line."""


def create_schema(cur: Any) -> bool:
    """The application's tables, when they are not there yet; whether they were created."""
    cur.execute("SELECT to_regclass('public.people') IS NULL")
    if not cur.fetchone()[0]:
        return False
    cur.execute("SELECT set_config('search_path', 'public', true)")  # (not the receiver's schema, once installed)
    cur.execute(SCHEMA.read_text())
    return True


def community_ids(count: int) -> list[UUID]:
    """B and C, then (for large requests) artificial communities with fixed ids."""
    return [COMMUNITY_B, COMMUNITY_C, *(UUID(int=(1 << 64) + i) for i in range(1, count - 1))]


def _handle(target: str) -> str:
    """The person's handle in the application: the target without the dataset's prefix."""
    handle = target.removeprefix(PREFIX)
    if not 1 <= len(handle) <= MAX_HANDLE:
        raise Refused(f"the demo application keeps handles of 1 to {MAX_HANDLE} characters; this one has {len(handle)}")
    return handle


def _seeded(handle: str, community: UUID) -> tuple[int, int]:
    """The rows and agents a person starts with in a community (fixed by the handle)."""
    d = hashlib.sha256(f"{PREFIX}{handle}|{community}".encode()).digest()
    return 3 + d[0] % 40, 1 + d[1] % 2


def _role(position: int) -> str:
    first_two = ("participant", "former_participant")
    return first_two[position] if position < 2 else ("participant" if (position - 1) % 2 else "former_participant")


def _person(cur: Any, handle: str) -> int:
    cur.execute(
        "INSERT INTO people (handle) VALUES (%s) ON CONFLICT (handle) DO UPDATE SET handle = EXCLUDED.handle "
        "RETURNING id",
        [handle],
    )
    return int(cur.fetchone()[0])


def _community(cur: Any, community: UUID) -> None:
    name = NAMES.get(community, f"Community …{str(community)[-4:]} (demo)")
    cur.execute("INSERT INTO communities (id, name) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING", [community, name])


def enroll(cur: Any, target: str, communities: int = 2) -> None:
    """The person (`demo:<handle>` or the bare handle), with the first `communities` of B, C, ... they
    are not a member of yet, each with its posts and agents; an existing person gains only what is missing."""
    handle = _handle(target)
    person = _person(cur, handle)
    cur.execute("SELECT community_id FROM memberships WHERE person_id = %s", [person])
    have = {UUID(str(row[0])) for row in cur.fetchall()}
    for position, community in enumerate(community_ids(communities)):
        if community in have:
            continue
        _community(cur, community)
        cur.execute(
            "INSERT INTO memberships (person_id, community_id, role) VALUES (%s, %s, %s)",
            [person, community, _role(position)],
        )
        rows, agents = _seeded(handle, community)
        _write(cur, person, community, rows=rows, agents=agents, body=f"post {{}} by {PREFIX}{handle}")


def _write(cur: Any, person: int, community: UUID, *, rows: int = 0, agents: int = 0, body: str = "post {}") -> None:
    if rows:
        cur.execute(
            "INSERT INTO posts (person_id, community_id, body) "
            "SELECT %s, %s, replace(%s, '{}', i::text) FROM generate_series(0, %s - 1) i",
            [person, community, body, rows],
        )
    if agents:
        cur.execute(
            "INSERT INTO agents (person_id, community_id, name) SELECT %s, %s, 'agent ' || i "
            "FROM generate_series(0, %s - 1) i",
            [person, community, agents],
        )


def add_rows(cur: Any, target: str, community: UUID, rows: int, role: str = "participant") -> None:
    """The person writes `rows` more posts in a community (joining it when not a member there yet)."""
    person = _person(cur, _handle(target))
    _community(cur, community)
    cur.execute(
        "INSERT INTO memberships (person_id, community_id, role) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
        [person, community, role],
    )
    _write(cur, person, community, rows=rows, body="new post {}")


def set_agents(cur: Any, target: str, community: UUID, agents: int) -> None:
    """The person's agents in a community become `agents`; refused where they are no member."""
    handle = _handle(target)
    cur.execute(
        "SELECT p.id FROM people p JOIN memberships m ON m.person_id = p.id "
        "WHERE p.handle = %s AND m.community_id = %s",
        [handle, community],
    )
    row = cur.fetchone()
    if row is None:
        raise Refused(f"{PREFIX}{handle} has no membership in community {community}")
    cur.execute("DELETE FROM agents WHERE person_id = %s AND community_id = %s", [row[0], community])
    _write(cur, int(row[0]), community, agents=agents)


def show(cur: Any, target: str) -> dict[str, Any]:
    """Per community where the person is a member or has rows: name, membership, posts, agents."""
    handle = _handle(target)
    cur.execute(
        """SELECT c.id, c.name, coalesce(m.role, 'not_a_member'),
                  (SELECT count(*) FROM posts x WHERE x.person_id = p.id AND x.community_id = c.id),
                  (SELECT count(*) FROM agents x WHERE x.person_id = p.id AND x.community_id = c.id)
           FROM people p JOIN communities c ON c.id IN (
               SELECT community_id FROM memberships WHERE person_id = p.id
               UNION SELECT community_id FROM posts WHERE person_id = p.id
               UNION SELECT community_id FROM agents WHERE person_id = p.id)
           LEFT JOIN memberships m ON m.person_id = p.id AND m.community_id = c.id
           WHERE p.handle = %s ORDER BY c.id""",
        [handle],
    )
    communities = [
        {"id": str(cid), "name": name, "membership": role, "rows": int(rows), "agents": int(agents)}
        for cid, name, role, rows, agents in cur.fetchall()
    ]
    return {"target": f"{PREFIX}{handle}", "communities": communities}


def _count(raw: str, flag: str, low: int) -> int:
    if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= MAX_ROWS:
        raise Refused(f"{flag} {raw[:20]!r} is refused: a whole number {low}-{MAX_ROWS:,}")
    return int(raw)


def _uuid(raw: str) -> UUID:
    try:
        return UUID(raw)
    except ValueError:
        raise Refused(f"--community {raw[:60]!r} is not a UUID") from None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m samples.demo.seed", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action")
    people = sub.add_parser("enroll", help="create the tables when missing, enroll people (default: the tour)")
    people.add_argument("handles", nargs="*")
    shown = sub.add_parser("show", help="per community: rows, agents, membership")
    shown.add_argument("target")
    add = sub.add_parser("add-rows", help="the person writes more posts in a community (joining it if needed)")
    add.add_argument("target")
    add.add_argument("--community", required=True)
    add.add_argument("--rows", required=True)
    agents = sub.add_parser("set-agents", help="the person's agents in a community become N")
    agents.add_argument("target")
    agents.add_argument("--community", required=True)
    agents.add_argument("--agents", required=True)
    args = parser.parse_args(argv or ["enroll"])
    os.environ["DJANGO_SETTINGS_MODULE"] = "receiver.settings"  # the receiver's database: the application's
    import django
    from django.db import connections, transaction

    django.setup()
    try:
        with transaction.atomic(using="target"), connections["target"].cursor() as cur:
            if args.action == "show":
                for c in show(cur, args.target)["communities"]:
                    print(f"  {c['id']}: {c['membership']}, {c['rows']} rows, {c['agents']} agents")
            elif args.action == "add-rows":
                add_rows(cur, args.target, _uuid(args.community), _count(args.rows, "--rows", 1))
            elif args.action == "set-agents":
                set_agents(cur, args.target, _uuid(args.community), _count(args.agents, "--agents", 0))
            else:
                made = create_schema(cur)
                for handle in args.handles or TOUR:
                    enroll(cur, handle)
                print(f"demo application {'created and ' if made else ''}seeded: {len(args.handles or TOUR)} people")
    except Refused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
