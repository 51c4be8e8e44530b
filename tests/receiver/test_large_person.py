"""Big people within their limits. The largest person the receiver admits (`RECEIVER_MAX_ROWS` rows
in one community, its default), deleted end to end in the sample forum through the receiver as its own
process, within the timeouts the back-office and the receiver agree on (every stage done on its first
send: no "nothing changed, retry"); one row more is refused at submission with the counts. The times
are printed, never asserted (`pytest -s` shows them): the performance is measured, not asserted. And
the one rule the limits keep (`wire.bounds`): a receiver whose stated bound on a call the back-office's
read timeout does not exceed by the margin is refused at registration and named by health until the
read timeout is raised."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from django.core.exceptions import ValidationError

from core import clock
from core.authority import named
from deletions import targets
from deletions.errors import Refused
from deletions.models import DeletionRequest, StageHistory, TargetSystem
from deletions.services import deletion_approve, deletion_submit
from deletions.targets import http
from ops.health import report
from tests.conftest import run_command
from tests.deletions.helpers import believed
from tests.receiver.conftest import Receiver, free_port
from tests.receiver.test_dataset import forum, rows, served  # noqa: F401  (the fixtures)
from wire import bounds

pytestmark = [pytest.mark.django_db(transaction=True)]
LIMIT = bounds.MAX_ROWS  # the receiver's default (it runs with no RECEIVER_MAX_ROWS set)


def big(url: str, handle: str, count: int) -> None:
    """A new forum person with exactly `count` rows in the first community: posts, comments on them,
    attachments on those comments (a fifth, three fifths, a fifth)."""
    posts, attachments = count // 5, count // 5
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.execute(
            "INSERT INTO users (handle, email, display_name) VALUES (%s, %s, 'big') RETURNING id",
            [handle, f"{handle}@example.org"],
        )
        (uid,) = cur.fetchone() or (None,)
        cur.execute("SELECT min(id) FROM communities")
        (community,) = cur.fetchone() or (None,)
        cur.execute(
            "INSERT INTO memberships (user_id, community_id, role) VALUES (%s, %s, 'participant')", [uid, community]
        )
        cur.execute(
            "INSERT INTO posts (community_id, author_id, title, body) "
            "SELECT %s, %s, 'title ' || g, 'body ' || g FROM generate_series(1, %s) g",
            [community, uid, posts],
        )
        cur.execute(
            "INSERT INTO comments (post_id, author_id, body) SELECT p.id, %s, 'comment ' || g "
            "FROM generate_series(0, %s - 1) g JOIN (SELECT id, row_number() OVER (ORDER BY id) - 1 AS i "
            "FROM posts WHERE author_id = %s) p ON p.i = g %% %s",
            [uid, count - posts - attachments, uid, posts],
        )
        cur.execute(
            "INSERT INTO attachments (comment_id, filename, bytes) "
            "SELECT id, 'file', 1 FROM comments WHERE author_id = %s ORDER BY id LIMIT %s",
            [uid, attachments],
        )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")


def test_the_largest_person_admitted_is_deleted_within_the_timeouts_and_one_row_more_is_refused_with_the_counts(
    forum: str,  # noqa: F811
    served: Receiver,  # noqa: F811
) -> None:
    began = time.monotonic()
    big(forum, "biggest", LIMIT + 1)
    seeded = time.monotonic() - began
    (uid,) = rows(forum, "SELECT id FROM users WHERE handle = 'biggest'")[0]

    # One row more than the limit: refused at submission, with the counts, nothing created.
    with pytest.raises(Refused) as refused:
        deletion_submit(target="forum:biggest", actor=named("operator-a"), reason="one row more")
    said = str(refused.value)
    assert f"{LIMIT + 1:,} in" in said and f"the limit is {LIMIT:,}" in said, said
    assert not DeletionRequest.objects.exists()

    # One row fewer (an attachment gone): the largest person admitted, deleted end to end.
    with psycopg.connect(forum) as conn:
        conn.execute(
            "DELETE FROM attachments WHERE id = (SELECT max(a.id) FROM attachments a "
            "JOIN comments c ON c.id = a.comment_id WHERE c.author_id = %s)",
            [uid],
        )
    began = time.monotonic()
    req = deletion_submit(target="forum:biggest", actor=named("operator-a"), reason="the largest person admitted")
    submitted = time.monotonic() - began
    seen = targets.for_target(req.target).preview(req.target, [c["id"] for c in req.inventory_json["communities"]])
    assert max(c["rows"] for c in seen.values()) == LIMIT, seen
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    began = time.monotonic()
    ran = run_command("run_deletion", str(req.id))
    deleted = time.monotonic() - began
    assert ran.code == 0, ran.err + served.logged()
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    # Every stage done on its first send: no "nothing changed, retry", no effect in question.
    stages = list(StageHistory.objects.filter(request_id=req.id))
    assert stages and all(s.attempts == 1 and s.status == "completed" for s in stages), [
        (s.stage, s.status, s.attempts, s.last_error) for s in stages
    ]
    results = [believed(s.metadata_json["result"], "forum:") for s in stages]
    assert max(r.get("rows_deleted", 0) for r in results) == LIMIT
    # What the application holds: their comments and attachments gone, their posts anonymized.
    assert rows(forum, "SELECT count(*) FROM comments WHERE author_id = %(u)s", u=uid) == [(0,)]
    assert rows(forum, "SELECT count(*) FROM posts WHERE author_id = %(u)s AND body <> '[deleted]'", u=uid) == [(0,)]
    took = {s.id: (s.finished_at - s.started_at).total_seconds() for s in stages if s.finished_at and s.started_at}
    largest = max(stages, key=lambda s: took.get(s.id, 0.0))
    stage_seconds = took[largest.id]
    print(
        f"\nlargest person admitted: {LIMIT:,} rows in one community; seeded in {seeded:.1f} s; submitted "
        f"(inventory and preview) in {submitted:.1f} s; run_deletion in {deleted:.1f} s; its largest stage "
        f"({largest.stage}) in {stage_seconds:.2f} s, {LIMIT / stage_seconds:,.0f} rows/s"
    )


def test_a_read_timeout_not_above_the_receivers_bound_is_refused_at_registration_and_named_by_health(
    settings: Any,
) -> None:
    settings.RECEIVER_IN_PROCESS = ""
    r = Receiver(port=free_port()).start(RECEIVER_STATEMENT_TIMEOUT_MS="25000")  # 25 s and the margin: 35 s
    try:
        keys = {r.key_id: r.public()}
        TargetSystem.objects.filter(prefix="demo:").update(read_timeout_seconds=bounds.READ_TIMEOUT_SECONDS)
        with pytest.raises(ValidationError) as refused:
            targets.register_answering(name="demo target system", prefix="demo:", base_url=r.url, keys=keys)
        said = " ".join(refused.value.messages)
        assert (
            f"the receiver at {r.url} is not registered: its read timeout (30 s) is shorter than the receiver's "
            "bound on a call (25 s, RECEIVER_STATEMENT_TIMEOUT_MS) plus 10 s: raise the read timeout to 35 s or "
            "more, or lower the receiver's bound"
        ) == said, said
        assert not TargetSystem.objects.filter(base_url=r.url).exists()

        # Registered without asking it (`register`), or its bound raised since: health names it.
        r.register()
        http._reached.clear()
        http._rewound.clear()
        check = report(clock.now())["checks"]["receivers"]
        assert check["ok"] is False, check
        assert f"demo target system at {r.url}: its read timeout (30 s) is shorter than" in check["detail"], check

        # Its read timeout raised (the admin): registration takes it, health is green.
        TargetSystem.objects.filter(prefix="demo:").update(read_timeout_seconds=35)
        targets.register_answering(name="demo target system", prefix="demo:", base_url=r.url, keys=keys)
        http._reached.clear()
        http._rewound.clear()
        check = report(clock.now())["checks"]["receivers"]
        assert check["ok"] is True, check
    finally:
        r.stop()
        if r.log is not None:
            r.log.close()
