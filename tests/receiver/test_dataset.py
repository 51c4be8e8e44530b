"""The dataset receiver: the sample forum application's own database, described by its dataset file,
served by the reference receiver as its own process; a deletion from submission to proof, checked
against what the application's tables hold before and after."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from core.authority import named
from core.store import connection_url
from deletions import targets
from deletions.errors import Refused
from deletions.models import DeletionRequest, StageHistory
from deletions.services import deletion_approve, deletion_submit
from samples.forum.seed import seed
from tests.conftest import ROOT, run_command
from tests.deletions.helpers import believed
from tests.receiver.conftest import Receiver, free_port

pytestmark = [pytest.mark.django_db(transaction=True)]
DATASET = ROOT / "samples" / "forum" / "dataset.yaml"
# The person's rows, table by table (what a person counting in psql would count).
MINE = {
    "posts": "SELECT id FROM posts WHERE author_id = %(u)s",
    "comments": "SELECT id FROM comments WHERE author_id = %(u)s",
    "attachments": "SELECT a.id FROM attachments a JOIN comments c ON c.id = a.comment_id WHERE c.author_id = %(u)s",
    "memberships": "SELECT id FROM memberships WHERE user_id = %(u)s",
}


@pytest.fixture
def forum() -> Iterator[str]:
    """A fresh forum database on the test server, seeded; its URL."""
    name = f"forum_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    url = connection_url().rsplit("/", 1)[0] + f"/{name}" if "?" not in connection_url() else _swap(name)
    with psycopg.connect(url) as conn:
        seed(conn, people=30, communities=4, seed=11)
    yield url
    with connection.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _swap(name: str) -> str:
    base, query = connection_url().split("?", 1)
    return base.rsplit("/", 1)[0] + f"/{name}?{query}"


def receiver_cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"RECEIVER_DATABASE_URL": url, "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "receiver", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def rows(url: str, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall())


def dump(url: str) -> dict[str, set[tuple[Any, ...]]]:
    return {
        t: set(rows(url, f"SELECT * FROM {t}"))
        for t in ("users", "communities", "memberships", "posts", "comments", "attachments")
    }


@pytest.fixture
def served(forum: str, settings: Any) -> Iterator[Receiver]:
    installed = receiver_cli(forum, "install", str(DATASET))
    assert installed.returncode == 0 and "installed" in installed.stdout, installed.stderr
    settings.RECEIVER_IN_PROCESS = ""
    r = Receiver(port=free_port())
    r.start(RECEIVER_DATABASE_URL=forum, RECEIVER_DATASET=str(DATASET))
    targets.register(name="forum", prefix="forum:", base_url=r.url, keys={r.key_id: r.public()})
    yield r
    r.stop()
    if r.log is not None:
        r.log.close()


def busiest(url: str) -> tuple[int, str]:
    """The person with the most rows (posts, comments) in at least two communities."""
    uid, handle = rows(
        url,
        "SELECT u.id, u.handle FROM users u WHERE (SELECT count(*) FROM memberships m WHERE m.user_id = u.id) >= 2 "
        "ORDER BY (SELECT count(*) FROM posts p WHERE p.author_id = u.id) + "
        "(SELECT count(*) FROM comments c WHERE c.author_id = u.id) DESC, u.id LIMIT 1",
    )[0]
    return uid, handle


def test_a_forum_deletion_from_submission_to_proof_matches_what_the_application_holds(
    forum: str, served: Receiver
) -> None:
    uid, handle = busiest(forum)
    before = dump(forum)
    mine = {t: {r[0] for r in rows(forum, sql, u=uid)} for t, sql in MINE.items()}
    req = deletion_submit(target=f"forum:{handle}", actor=named("operator-a"), reason="forum sample")
    # The preview's counts are the application's own: per community, the person's posts, comments, attachments.
    seen = targets.for_target(req.target).preview(req.target, [c["id"] for c in req.inventory_json["communities"]])
    assert sum(c["rows"] for c in seen.values()) == len(mine["posts"]) + len(mine["comments"]) + len(
        mine["attachments"]
    )
    # Every community of theirs, then their own records (always last: their own row changes after all the rest).
    assert len(req.inventory_json["communities"]) == len(mine["memberships"]) + 1
    assert req.inventory_json["communities"][-1]["role"] == "own_records"
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    ran = run_command("run_deletion", str(req.id))
    assert ran.code == 0, ran.err + served.logged()
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    after = dump(forum)
    # Gone: the person's comments, their attachments and their memberships; anonymized: their posts
    # and their own row, as the dataset file says.
    for table in ("comments", "attachments", "memberships"):
        assert not {r for r in after[table] if r[0] in mine[table]}, table
    posts = {r[0]: r for r in after["posts"]}
    assert all(posts[p][3] == "[deleted]" and posts[p][4] == "[deleted]" for p in mine["posts"])
    me = next(r for r in after["users"] if r[0] == uid)
    assert me[1] == f"deleted-{uid}" and me[2] == f"deleted-{uid}" and me[3] == "deleted user" and me[4] is None
    # Nothing else changed: every other row is the same row.
    for table in before:
        untouched = {
            r for r in before[table] if r[0] not in mine.get(table, set()) and not (table == "users" and r[0] == uid)
        }
        assert untouched <= after[table], table
    # The evidence, signed by the receiver, counts what the tables lost.
    results = [believed(s.metadata_json["result"], "forum:") for s in StageHistory.objects.filter(request_id=req.id)]
    purged = [r for r in results if "rows_deleted" in r]
    assert sum(r["tables"]["comments"]["changed"] for r in purged) == len(mine["comments"])
    assert sum(r["tables"]["attachments"]["changed"] for r in purged) == len(mine["attachments"])
    assert sum(r["tables"]["posts"]["changed"] for r in purged) == len(mine["posts"])
    assert all(r["rows_remaining"] == 0 and r["dataset"] == "forum" for r in purged)
    assert all(r["tables"][t]["remaining"] == 0 for r in purged for t in ("comments", "attachments"))
    assert all(r["version_found"] == r["version_before"] and r["fence"] == 1 for r in purged)
    # The last effect walked the catalog again: what remains of the person is what the file anonymizes
    # (their posts, and others' comments and attachments under them), nothing it deletes.
    last = max(results, key=lambda r: r["applied_at"])
    assert last["catalog_walk"]["foreign_key_paths"] >= 5
    assert last["remains"]["posts"] == {"references": len(mine["posts"]), "rule": "anonymize"}
    assert set(last["remains"]) <= {"posts", "comments under posts", "attachments under posts"}


def test_a_row_the_person_wrote_after_approval_makes_the_receiver_refuse_and_the_case_returns_to_review(
    forum: str, served: Receiver
) -> None:
    uid, handle = busiest(forum)
    req = deletion_submit(target=f"forum:{handle}", actor=named("operator-a"), reason="forum sample")
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    first = "SELECT community_id FROM memberships WHERE user_id = %(u)s ORDER BY community_id LIMIT 1"
    community = rows(forum, first, u=uid)[0][0]
    with psycopg.connect(forum) as conn:
        conn.execute(
            "INSERT INTO posts (community_id, author_id, title, body) VALUES (%s, %s, 'late', 'after approval')",
            [community, uid],
        )
    refused = run_command("run_deletion", str(req.id))
    assert refused.code == 1 and "source changed" in refused.err, refused.err
    req = DeletionRequest.objects.get(id=req.id)
    assert req.status == "needs_review" and "source changed" in req.open_question
    assert rows(forum, "SELECT count(*) FROM posts WHERE author_id = %(u)s AND body <> '[deleted]'", u=uid)[0][0] > 0


@pytest.mark.parametrize(
    "change, names",
    [
        (("tables:\n  posts:", "tables:\n  postz:"), "tables.postz: no table postz"),
        (
            ("    person: author_id\n    community: community_id", "    person: title\n    community: community_id"),
            "tables.posts.person: posts.title is no foreign key",
        ),
        (
            ("    community: [post_id, community_id]", "    community: [post_id]"),
            "tables.comments.community: the path ends at posts, not at communities",
        ),
        (("  attachments:\n", "  uploads:\n"), "tables.uploads: no table uploads"),
        (("      email: tombstone", "      email: null"), "person.action: users.email is NOT NULL"),
        (
            ("      handle: tombstone ", "      handle: gone "),
            "person.action: users.handle is under the unique index users_handle_key",
        ),
    ],
)
def test_a_bad_dataset_file_is_refused_at_install_naming_the_entry_and_installs_nothing(
    forum: str, tmp_path: Path, change: tuple[str, str], names: str
) -> None:
    text = DATASET.read_text()
    assert change[0] in text
    bad = tmp_path / "dataset.yaml"
    bad.write_text(text.replace(change[0], change[1], 1))
    ran = receiver_cli(forum, "install", str(bad))
    assert ran.returncode == 1 and ran.stderr.count("\n") == 1 and ran.stderr.startswith("refused: "), ran.stderr
    assert names in ran.stderr
    assert rows(forum, "SELECT count(*) FROM pg_namespace WHERE nspname = 'receiver'") == [(0,)]


def test_a_cascade_into_a_table_the_file_does_not_name_is_refused(forum: str, tmp_path: Path) -> None:
    text = DATASET.read_text()
    bad = tmp_path / "dataset.yaml"
    bad.write_text(text[: text.index("  attachments:")])  # comments cascade into attachments, now unnamed
    ran = receiver_cli(forum, "install", str(bad))
    assert ran.returncode == 1 and "tables.comments: deleting its rows cascades into attachments" in ran.stderr
    assert rows(forum, "SELECT count(*) FROM pg_namespace WHERE nspname = 'receiver'") == [(0,)]


def test_a_stale_worker_is_refused_by_the_receiver_process_in_the_applications_own_transaction(
    forum: str, served: Receiver
) -> None:
    """worker-a SIGSTOPped holding a signed grant; its lease runs out and worker-b takes generation 2 and
    finishes; SIGCONT: worker-a's grant reaches the receiver, whose receiver.apply refuses it as stale
    (the fence is in the forum's own database), and nothing of the forum changes."""
    import signal

    import psutil

    from tests.deletions.helpers import start_worker
    from tests.support import force, wait_for

    _, handle = busiest(forum)
    req = deletion_submit(target=f"forum:{handle}", actor=named("operator-a"), reason="forum sample")
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    original = start_worker(req.id, "--executor-id", "worker-a", PAUSE_AT="after-grant", RECEIVER_IN_PROCESS="")
    proc = psutil.Process(original.pid)
    wait_for(lambda: proc.status() == psutil.STATUS_STOPPED, what="worker-a paused holding its grant")
    force(DeletionRequest.objects.filter(id=req.id), lease_expires_at=timezone.now() - timedelta(seconds=1))
    taken = run_command("run_deletion", str(req.id), "--executor-id", "worker-b")
    assert taken.code == 0, taken.err
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    after = dump(forum)
    applied = rows(forum, "SELECT operation_id, generation FROM receiver.receiver_operations ORDER BY applied_at")
    original.send_signal(signal.SIGCONT)
    _, err = original.communicate(timeout=120)
    assert original.returncode == 1 and "stale" in err and "generation 1" in err, err
    assert (
        rows(forum, "SELECT operation_id, generation FROM receiver.receiver_operations ORDER BY applied_at") == applied
    )
    assert {g for _, g in applied} == {2}
    assert dump(forum) == after  # the refused grant changed nothing in the application


def test_a_person_with_more_rows_than_one_effect_may_change_is_refused_at_submission_with_the_counts(
    forum: str, settings: Any
) -> None:
    installed = receiver_cli(forum, "install", str(DATASET))
    assert installed.returncode == 0, installed.stderr
    settings.RECEIVER_IN_PROCESS = ""
    r = Receiver(port=free_port())
    r.start(RECEIVER_DATABASE_URL=forum, RECEIVER_DATASET=str(DATASET), RECEIVER_MAX_ROWS="2")
    try:
        targets.register(name="forum", prefix="forum:", base_url=r.url, keys={r.key_id: r.public()})
        _, handle = busiest(forum)
        with pytest.raises(Refused) as refused:
            deletion_submit(target=f"forum:{handle}", actor=named("operator-a"), reason="too big")
        assert "refused the inventory" in str(refused.value) and "the limit is 2" in str(refused.value)
        assert not DeletionRequest.objects.exists()
    finally:
        r.stop()
        if r.log is not None:
            r.log.close()
