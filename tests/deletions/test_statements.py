"""A stage costs the same statements however long the request's history is.

Each run starts with one general transition (the saved history read and replayed once);
every stage after that is its running mark, its effect and its result + advance, decided
from the row and the run's plan. Counted with `connection.execute_wrapper`, whatever DEBUG says.
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
    assert per_stage <= 12, per_stage  # running mark 3, effect 3, result + advance 4 (+ at most 2 spare)
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
