"""Cost flat in history: per-stage time of a 500-community request against a 50-community one,
both built through `submit_deletion --demo-communities` and `approve_deletion`, run by the
worker; and reconstruction from scratch (what recovery and `show_deletion` use)."""

from __future__ import annotations

import json
import statistics
import time
import uuid
from io import StringIO
from typing import Any

from django.core.management import call_command

from bench.floor import enqueued_on


def submitted_and_approved(communities: int) -> str:
    out = StringIO()
    from tests.conftest import with_token  # the bench acts as operator-a and operator-b, with their tokens

    submit = ("--target", f"demo:h-{uuid.uuid4().hex[:10]}", "--requested-by", "operator-a")
    call_command("submit_deletion", *with_token(submit), "--demo-communities", str(communities), stdout=out)
    req = json.loads(out.getvalue())
    approve = (req["id"], "--approved-by", "operator-b", "--inventory-digest", req["inventory_digest"])
    with enqueued_on(None):  # the run here is the bench's own: none is left on the queue for the drain's cluster
        call_command("approve_deletion", *with_token(approve), stdout=StringIO())
    return req["id"]


def per_stage(request_ids: list[str]) -> float:
    from deletions import worker
    from deletions.models import StageHistory

    start = time.perf_counter()
    for rid in request_ids:
        outcome = worker.run(uuid.UUID(rid), executor_id="bench-history", budget=10_000)
        assert outcome.exit_code == 0 and not outcome.more_to_do, outcome
    elapsed = time.perf_counter() - start
    return elapsed / StageHistory.objects.filter(request_id__in=request_ids).count()


def growth(rounds: int, small: int = 50, large: int = 500) -> dict[str, Any]:
    """Interleaved rounds: one large request against as many small ones as make a similar stage count."""
    smalls, larges = [], []
    count = max(1, large // small)
    for _ in range(rounds):
        larges.append(per_stage([submitted_and_approved(large)]))
        smalls.append(per_stage([submitted_and_approved(small) for _ in range(count)]))
    s, lg = statistics.median(smalls), statistics.median(larges)
    ratios = [big / little for big, little in zip(larges, smalls, strict=True)]  # within each round
    return {
        "small_ms": s * 1000,
        "large_ms": lg * 1000,
        "ratio": statistics.median(ratios),
        "ratios": ratios,
        "small": small,
        "large": large,
    }


def reconstruct(stages: int = 10_000, *, quick: bool = False) -> dict[str, Any]:
    """Replay of `stages` saved rows from scratch (pure; the rows a 10,000-stage request would load),
    and the real load + replay of the largest request the rules allow (1,000 places: 999 communities and
    their own records)."""
    from datetime import UTC, datetime

    from deletions.contract import NewStage, StageSnapshot
    from deletions.rules import workflow
    from deletions.rules.inventory import MAX_DEMO_COMMUNITIES
    from deletions.selectors import load_history
    from deletions.store.stages import operation_id

    communities = stages // 2  # 1 + 2 per community: 10,001 rows for 10,000
    inventory = {
        "version": 1,
        "target": "demo:replay",
        "communities": [{"id": str(uuid.UUID(int=i + 1)), "role": "participant"} for i in range(communities)],
    }
    rid, now, rows, previous = uuid.uuid4(), datetime.now(UTC), [], None
    new: NewStage | None = workflow.initial_stage("demo:replay")
    plan = workflow.Plan.of(inventory)
    while new is not None:
        result = {"has_agents": True} if new.stage == workflow.PURGE_DB else {}
        chosen, nxt = workflow.advance(new.stage, new.community_id, result, plan)
        sid = uuid.uuid4()
        rows.append(
            StageSnapshot(
                id=sid,
                stage=new.stage,
                community_id=new.community_id,
                status="completed",
                is_current=nxt is None,
                metadata={
                    "inputs": new.inputs,
                    "previous_stage_id": str(previous) if previous else None,
                    "result": result,
                    "decision": chosen,
                },
                started_at=now,
                finished_at=now,
                last_error=None,
                operation_id=operation_id(rid, new.stage, new.community_id),
                attempts=1,
            )
        )
        previous, new = sid, nxt
    start = time.perf_counter()
    progress = workflow.reconstruct(rows, inventory, 1, max_communities=communities)
    replay = time.perf_counter() - start
    assert len(progress.chain) == len(rows) and len(progress.covered) == communities - 1  # the last is current

    if quick:
        return {"stages": len(rows), "replay_s": replay}
    from deletions import worker
    from deletions.models import DeletionRequest

    largest = submitted_and_approved(MAX_DEMO_COMMUNITIES)  # 2,000 stages; all but the last run, it stays current
    ran = worker.run(uuid.UUID(largest), executor_id="bench-history", budget=2 * MAX_DEMO_COMMUNITIES + 1)
    assert ran.more_to_do, ran

    req = DeletionRequest.objects.get(id=largest)
    start = time.perf_counter()
    history = load_history(req.id, 10_000)
    workflow.reconstruct(history, req.inventory_json, req.inventory_version)
    loaded = time.perf_counter() - start
    return {"stages": len(rows), "replay_s": replay, "largest_stages": len(history), "largest_load_replay_s": loaded}
