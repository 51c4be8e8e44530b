"""The floor of a stage: the work the seeds' guarantees need and nothing more, on the engine's
own tables as they are (their triggers, foreign keys and indexes) and against the demo
application's real rows, so the bench's ratios compare the engine with the least the same work costs.

Per request: the receiver's fence read (the same call the engine makes), the claim (lease,
generation past the saved one and the fence, the lease event) and the start (running, the first
stage row), one statement each. Per stage, five round trips:
1. mark + submit: the stage running and submitted, the attempt opened (one fenced statement);
2. the grant read: the request locked under the lease, the latest approval, its approver's and the
   requester's permissions now, the digest and the data version (one statement), then the grant
   signed (Ed25519) in the process;
3. the target effect: the same signed call to the demo application's receiver the engine makes
   (through the same adapter, `deletions.targets.http`), where the grant is verified and
   `receiver.apply` called (generated from the demo's dataset), one transaction there that fences,
   checks the epoch, the membership and its version, deletes the same rows the engine's run deletes
   and records the operation with its evidence; the answer's signature verified;
4. the result: completed and current, the attempt closed (one fenced statement);
5. the transition: the row retired with its decision and the successor inserted, or, after the
   last stage, the request completed and its lease released (one fenced statement).

The statements are the engine's own named statements (`deletions/store/*.sql`, the one writer of
each move), run back to back with what the engine decides in Python (the stage order, the grant)
computed from the approved inventory; so `engine / floor` is what the engine's Python, its reads
between moves and its queue cost over the same writes. Nothing else: no heartbeat, no snapshot,
no log line, no policy call.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.db import connection

# gate_user, purge_db and purge_agents in each of the demo's two communities, then their own records' purge_db
STAGES_PER_REQUEST = 6


def seed(n: int, label: str) -> list[uuid.UUID]:
    """`n` approved requests through the services (as an intake and an approver make them)."""
    from tests.conftest import submit_and_approve

    return [submit_and_approve(f"demo:{label}-{uuid.uuid4().hex[:10]}").id for _ in range(n)]


@dataclass(frozen=True)
class Started:
    """What a run holds between its stages: the lease, the plan and the current stage row."""

    request_id: uuid.UUID
    owner: str
    generation: int
    expires: datetime
    inventory: dict[str, Any]
    stage_id: uuid.UUID
    stages: int
    target: Any  # the receiver's adapter, looked up once a run, as the engine looks it up


def start(request_id: uuid.UUID, owner: str) -> Started:
    """The claim and the start: two statements."""
    from core import clock
    from deletions import targets
    from deletions.contract import Lease
    from deletions.models import RUNNABLE_STATUSES
    from deletions.store import leases, stages

    now = clock.now()
    expires = now + timedelta(seconds=60)
    with connection.cursor() as cur:
        target = targets.for_target("demo:")  # (the bench's requests are all demo: people)
        past = target.fence(request_id)
        claimed = _one(
            leases.SQL, cur, "claim", request_id=request_id, owner=owner, past=past, expires=expires, now=now,
            runnable=[str(s) for s in RUNNABLE_STATUSES],
        )  # fmt: skip
        generation, _, _, _, inventory, _ = claimed
        inv = json.loads(inventory) if isinstance(inventory, str) else inventory
        lease = Lease(request_id, owner, generation, expires)
        fenced = {"request_id": request_id, "owner": owner, "generation": generation}
        first = _plan(inv)[0]
        row = _one(stages.SQL, cur, "start_request", **fenced, **stages._new_row(lease, first, None), now=now,
                   action="started")  # fmt: skip
    return Started(request_id, owner, generation, expires, inv, row[0], len(_plan(inv)), target)


def stage(run: Started, i: int) -> uuid.UUID | None:
    """Stage `i` of the plan: mark + submit, the grant read and signed, the target's one call, the
    result, the transition (five round trips). The next stage's row id; None after the last."""
    from core import clock
    from deletions import receiver
    from deletions.contract import Lease
    from deletions.rules.workflow import RULES_VERSION, Plan
    from deletions.store import stages
    from deletions.store.requests import inventory_digest

    lease = Lease(run.request_id, run.owner, run.generation, run.expires)
    plan = _plan(run.inventory)
    fenced = {"request_id": run.request_id, "owner": run.owner, "generation": run.generation}
    decision = json.dumps({"rules_version": RULES_VERSION, "transition": "floor"})
    with connection.cursor() as cur:

        def one(name: str, **params: Any) -> tuple[Any, ...]:
            return _one(stages.SQL, cur, name, **fenced, **params)

        now = clock.now()
        row = stages.snapshot(one("begin_stage", stage_id=run.stage_id, now=now, submit=True, action="running"))
        digested = Plan.of(run.inventory, inventory_digest(run.inventory))
        granted = receiver.grant(lease, row, digested, now=now)  # the one read, the rule, the signature
        evidence = run.target.apply(granted.token)  # signed, checked, applied: the same call the engine makes
        one("save_result", stage_id=row.id, now=clock.now(), result=json.dumps(evidence), action="completed")
        if i + 1 == len(plan):
            one("complete", stage_id=row.id, decision=decision, now=clock.now(), action="completed")
            return None
        successor = stages._new_row(lease, plan[i + 1], row.id)
        moved = one("advance", **successor, stage_id=row.id, decision=decision, now=clock.now(), action="advanced")
        return cast(uuid.UUID, moved[0])


def run(request_id: uuid.UUID, owner: str) -> int:
    """Run one approved request to completion at the floor; the stages it ran."""
    started = start(request_id, owner)
    current = started
    for i in range(started.stages):
        nxt = stage(current, i)
        if nxt is not None:
            current = dataclasses.replace(current, stage_id=nxt)
    return started.stages


def _plan(inv: dict[str, Any]) -> list[Any]:
    """The stages the rules run for this inventory: the gate, then each community's purge of its
    rows and of its agents (the demo's people have agents in each), then their own records' purge of
    rows (no agents are ever there), last."""
    from deletions.contract import NewStage

    target = inv["target"]
    plan = [NewStage("gate_user", None, {"target": target})]
    for c in inv["communities"]:
        cid = c["id"]
        steps = ("purge_db",) if c.get("role") == "own_records" else ("purge_db", "purge_agents")
        plan += [NewStage(s, cid, {"target": target, "community_id": cid}) for s in steps]
    return plan


def _one(statements: Any, cur: Any, name: str, **params: Any) -> tuple[Any, ...]:
    """A fenced statement's row: at the floor nothing else holds the request, so it always finds one."""
    found = statements.one(cur, name, **params)
    if found is None:
        raise RuntimeError(f"floor: {name} found nothing for request {params.get('request_id')}")
    return cast(tuple[Any, ...], found)


def run_all(ids: list[uuid.UUID], owner: str) -> dict[str, Any]:
    done = sum(run(rid, owner) for rid in ids)
    return {"stages": done}
