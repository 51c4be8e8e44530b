"""A stage costs the same statements however long the request's history is.

Each run starts with one general transition (the saved history read and replayed once);
every stage after that is its running mark, its grant and its result saved with the next step
(decided from the row and the run's plan): four statements. Counted with
`connection.execute_wrapper`, whatever DEBUG says.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any
from uuid import UUID

import pytest
from django.db import connection

from deletions import worker
from deletions.models import DeletionRequest
from tests import target
from tests.conftest import manage_argv, subprocess_env

pytestmark = pytest.mark.django_db(transaction=True)


def submitted_and_approved(cmd, target: str, communities: int) -> UUID:
    ran = cmd(
        "submit_deletion", "--target", target, "--requested-by", "operator-a", "--demo-communities", str(communities)
    )
    assert ran.code == 0, ran.err
    req = json.loads(ran.out)
    ran = cmd(
        "approve_deletion", req["id"], "--approved-by", "operator-b", "--inventory-digest", req["inventory_digest"]
    )
    assert ran.code == 0, ran.err
    return UUID(req["id"])


def statements_of(run: Callable[[], Any]) -> int:
    seen = []

    def count(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        run()
    return len(seen)


def window(request_id: UUID, stages: int) -> int:
    """Statements of one run of `stages` stages (claim, one general transition, the stages, release)."""
    outcome = None

    def run() -> None:
        nonlocal outcome
        outcome = worker.run(request_id, executor_id="counting", budget=stages)

    count = statements_of(run)
    assert outcome is not None and outcome.handlers_run == stages and outcome.more_to_do, outcome
    return count


def test_statements_per_stage_do_not_grow_with_the_history(cmd, observe) -> None:
    small = submitted_and_approved(cmd, "demo:small", 2)  # 6 stages
    big = submitted_and_approved(cmd, "demo:big", 50)  # 102 stages
    for rid in (small, big):
        worker.run(rid, executor_id="counting", budget=1)  # the gate: the first run initializes
    small_window = window(small, 3)
    big_early = window(big, 3)
    worker.run(big, executor_id="counting", budget=80)
    big_late = window(big, 3)  # stages 85-87, with 84 rows of history behind them
    assert small_window == big_early == big_late, (small_window, big_early, big_late)
    single = window(big, 1)
    per_stage = (big_late - single) / 2
    # the running mark, the grant, and the result saved with the next step (two statements, one transaction)
    assert per_stage == 4, per_stage
    observe(
        f"statements for 3 stages: 6-stage request {small_window}, 102-stage request early {big_early}, late "
        f"{big_late}; {per_stage:g} per stage"
    )


def test_demo_communities_builds_b_and_c_first_and_refuses_what_it_cannot(cmd) -> None:
    ran = cmd("submit_deletion", "--target", "demo:wide", "--requested-by", "operator-a", "--demo-communities", "4")
    assert ran.code == 0, ran.err
    ids = [c["id"] for c in json.loads(ran.out)["inventory"]["communities"]]
    assert ids[:2] == ["00000000-0000-0000-0000-00000000000b", "00000000-0000-0000-0000-00000000000c"]
    assert len(ids) == len(set(ids)) == 5 and ids[-1] == target.OWN_RECORDS  # their own records, last
    for bad in ("1", "1000"):  # 1,000 communities and their own records: one place over the limit
        ran = cmd(
            "submit_deletion", "--target", f"demo:w{bad}", "--requested-by", "operator-a", "--demo-communities", bad
        )
        assert ran.code == 2 and "--demo-communities" in ran.err and len(ran.err.strip().splitlines()) == 1, ran.err
    argv = manage_argv(
        "submit_deletion", "--target", "demo:wlots", "--requested-by", "operator-a", "--demo-communities", "lots"
    )
    proc = subprocess.run(argv, env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "invalid int value: 'lots'" in proc.stderr, proc.stderr
    assert not DeletionRequest.objects.exclude(target="demo:wide").exists()  # refused: nothing written


def server_commits() -> int:
    """The case database's commits as the server counts them (`pg_stat_database.xact_commit`), once every
    other backend on it has exited (a worker process's counts are flushed as its backend exits) and this
    one's pending counts are flushed (`pg_stat_force_next_flush`: at the end of its statement)."""
    from tests.support import wait_for

    def alone() -> bool:
        with connection.cursor() as cur:
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            return cur.fetchone()[0] == 0

    wait_for(alone, what="the worker's backend gone")
    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_force_next_flush()")
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
        return int(cur.fetchone()[0])


def test_a_stage_commits_three_times_at_the_case_database(cmd, observe) -> None:
    """Counted by the server, in a real worker process: a request's run costs its claim and its start,
    then three commits a stage (the running mark, the grant's locked read, the result saved with the next
    step). The difference between a short and a long request's whole runs leaves only the stages."""
    from tests.deletions.helpers import start_worker

    runs: dict[str, tuple[int, int]] = {}
    for name, communities in (("short", 2), ("long", 7)):
        # Autovacuum's own transactions are counted there too, and only ever add: the least of three runs
        # is the worker's.
        for attempt in range(3):
            rid = submitted_and_approved(cmd, f"demo:{name}-{attempt}", communities)
            before = server_commits()
            proc = start_worker(rid, "--executor-id", f"counting-{name}")
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            commits = server_commits() - before  # (the reading's own commits are the same for every run)
            assert DeletionRequest.objects.get(id=rid).status == "completed"
            stages = DeletionRequest.objects.get(id=rid).stages.count()
            runs[name] = min(runs.get(name, (commits, stages)), (commits, stages))
    (short, short_stages), (long, long_stages) = runs["short"], runs["long"]
    per_stage = (long - short) / (long_stages - short_stages)
    assert per_stage == 3, runs
    observe(
        f"server-counted commits at the case database: {short} for a {short_stages}-stage request, {long} for a "
        f"{long_stages}-stage one: {per_stage:g} a stage, {short - 3 * short_stages} a run besides"
    )
