"""Realistic forum data (Faker, seeded: the same every run): `python samples/forum/seed.py DATABASE_URL`.

Loads schema.sql into an empty database and fills it: people, communities, memberships, posts,
comments on others' posts and attachments on comments."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import psycopg
from faker import Faker

SCHEMA = Path(__file__).with_name("schema.sql")


def seed(conn: Any, *, people: int = 40, communities: int = 5, seed: int = 7) -> list[str]:
    """Create the schema and its rows; the handles, in creation order."""
    fake, rng = Faker(), random.Random(seed)
    Faker.seed(seed)
    with conn.cursor() as cur:
        cur.execute(SCHEMA.read_text())
        handles = []
        for i in range(people):
            handle = f"{fake.user_name()}{i}"
            cur.execute(
                "INSERT INTO users (handle, email, display_name, bio) VALUES (%s, %s, %s, %s)",
                [handle, f"{handle}@{fake.free_email_domain()}", fake.name(), fake.sentence() if i % 3 else None],
            )
            handles.append(handle)
        for _ in range(communities):
            cur.execute("INSERT INTO communities (name) VALUES (%s)", [fake.unique.catch_phrase()])
        for user in range(1, people + 1):
            for community in rng.sample(range(1, communities + 1), rng.randint(1, min(3, communities))):
                role = rng.choice(["participant", "participant", "former_participant", "moderator"])
                cur.execute(
                    "INSERT INTO memberships (user_id, community_id, role) VALUES (%s, %s, %s)", [user, community, role]
                )
        cur.execute("SELECT user_id, community_id FROM memberships ORDER BY id")
        members = cur.fetchall()
        for user, community in members:
            for _ in range(rng.randint(0, 4)):
                cur.execute(
                    "INSERT INTO posts (community_id, author_id, title, body) VALUES (%s, %s, %s, %s)",
                    [community, user, fake.sentence(nb_words=5), fake.paragraph()],
                )
        cur.execute("SELECT id, community_id FROM posts ORDER BY id")
        posts = cur.fetchall()
        by_community: dict[int, list[int]] = {}
        for user, community in members:
            by_community.setdefault(community, []).append(user)
        for post, community in posts:
            for _ in range(rng.randint(0, 3)):
                author = rng.choice(by_community[community])
                cur.execute(
                    "INSERT INTO comments (post_id, author_id, body) VALUES (%s, %s, %s) RETURNING id",
                    [post, author, fake.sentence()],
                )
                (comment,) = cur.fetchone()
                if rng.random() < 0.3:
                    cur.execute(
                        "INSERT INTO attachments (comment_id, filename, bytes) VALUES (%s, %s, %s)",
                        [comment, fake.file_name(), rng.randint(100, 2_000_000)],
                    )
    conn.commit()
    return handles


if __name__ == "__main__":
    with psycopg.connect(sys.argv[1]) as connection:
        made = seed(connection)
    print(f"forum seeded: {len(made)} people, e.g. forum:{made[0]}")
