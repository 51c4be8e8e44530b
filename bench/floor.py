"""The guarantee floor: the least a stage costs that keeps the seeds' guarantees, on the engine's own
tables as they are (their triggers, foreign keys and indexes) and against the demo application's real
rows, so the bench's ratios compare the engine with the least the same work can cost.

Per request: the receiver's fence read (the same call the engine makes), the claim (lease,
generation past the saved one and the fence, the lease event) and the start (running, the first
stage row), one statement each. Per stage, three commits and four statements at the case database:
1. the intent, durable before the send: mark + submit (`begin_stage`, one fenced statement, a commit);
2. the grant read with the same authority checks (the request under the lease, the latest approval,
   its approver's and the requester's permissions now, the digest, the data version: one statement,
   a read-only commit), then signed (Ed25519) in the process;
3. the target's effect: the same signed call to the demo application's receiver the engine makes
   (through the same adapter, `deletions.targets.http`, mounted or over HTTP as the side says), where
   the grant is verified and `receiver.apply` runs in one transaction with the call's record; the
   answer's signature verified;
4. the outcome and the next step as one restart point: the result saved and the transition (the
   successor inserted, or the request completed and its lease released) in ONE commit
   (`restart_point`: `save_result` and `advance`/`complete` pipelined in one transaction, as the engine's
   `stages.save_and_advance` sends them).

The statements are the engine's own named statements (`deletions/store/*.sql`, the one writer of
each move); what the engine decides in Python (the stage order, the grant) is computed from the
approved inventory. Nothing else: no heartbeat, no snapshot, no log line, no policy call.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.db import connection

# gate_user, purge_db and purge_agents in each of the demo's two communities, then their own records' purge_db
STAGES_PER_REQUEST = 6


def seed(n: int, label: str, queue: str | None = None) -> list[uuid.UUID]:
    """`n` approved requests through the services (as an intake and an approver make them). Each
    approval enqueues its run on commit: on the django-q2 queue `queue` when given (the drain's own),
    else on a queue of this seeding alone, emptied at once, so no side leaves a task behind for
    another side's cluster to consume."""
    return approved([f"demo:{label}-{uuid.uuid4().hex[:10]}" for _ in range(n)], queue)


def approved(people: list[str], queue: str | None = None) -> list[uuid.UUID]:
    """A request for each of these people, submitted and approved through the services, its run
    enqueued on `queue` or on none (`seed`). A `demo:` person is enrolled in the demo application
    first (as its mounted receiver enrolls whoever an inventory asks about), so a receiver in its own
    process holds them too."""
    from samples.demo import inprocess
    from tests.conftest import submit_and_approve

    inprocess.mount()
    for person in people:
        inprocess.enroll(person, 2)
    with enqueued_on(queue):
        return [submit_and_approve(person).id for person in people]


@contextmanager
def enqueued_on(queue: str | None = None) -> Iterator[None]:
    """The runs approvals enqueue in this block go to the django-q2 queue `queue`, or, when None, to a
    queue of this block alone, emptied after it: no run is left for a cluster to consume."""
    from django.conf import settings
    from django.test import override_settings
    from django_q.models import OrmQ

    key = queue or f"bench-seeded-{uuid.uuid4().hex[:10]}"
    with override_settings(Q_CLUSTER={**settings.Q_CLUSTER, "name": key}):
        yield
    if queue is None:
        OrmQ.objects.filter(key=key).delete()


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
        claimed = _claimed(
            cur, leases.claim_sql(), request_id=request_id, owner=owner, past=past, expires=expires, now=now,
            runnable=[str(s) for s in RUNNABLE_STATUSES],
        )  # fmt: skip
        generation, _, _, _, inventory, _, _ = claimed
        inv = json.loads(inventory) if isinstance(inventory, str) else inventory
        lease = Lease(request_id, owner, generation, expires)
        fenced = {"request_id": request_id, "owner": owner, "generation": generation}
        first = _plan(inv)[0]
        row = _one(stages.SQL, cur, "start_request", **fenced, **stages._new_row(lease, first, None), now=now,
                   action="started")  # fmt: skip
    return Started(request_id, owner, generation, expires, inv, row[0], len(_plan(inv)), target)


def stage(run: Started, i: int) -> uuid.UUID | None:
    """Stage `i` of the plan: mark + submit, the grant read and signed, the target's one call, the
    result and the transition as one commit (four statements). The next stage's row id; None after
    the last."""
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
        evidence = effect(run.target, granted.token)  # signed, checked, applied: the same call the engine makes
        saved = {**fenced, "stage_id": row.id, "now": clock.now()}
        if i + 1 == len(plan):
            restart_point(saved, evidence, "complete", run.target.r.prefix, decision=decision, action="completed")
            return None
        successor = stages._new_row(lease, plan[i + 1], row.id)
        moved = restart_point(
            saved, evidence, "advance", run.target.r.prefix, **successor, decision=decision, action="advanced"
        )
        return cast(uuid.UUID, moved[0])


def effect(target: Any, token: str) -> dict[str, Any]:
    """The adapter's `apply` (`deletions.targets.http.HttpTarget`): the same signed call, its answer judged
    and its evidence verified against the registered key."""
    return cast(dict[str, Any], target.apply(token))


def restart_point(
    saved: dict[str, Any], evidence: dict[str, Any], then: str, prefix: str | None, **params: Any
) -> tuple[Any, ...]:
    """The outcome and the next step as one restart point, one commit: the engine's `save_result` (the
    evidence saved, and the receiver state it carries noted on the registration) and `advance` (or
    `complete`) pipelined in one implicit transaction (two statements, one network round trip), as
    `stages.save_and_advance` sends them."""
    from deletions.store import stages

    connection.ensure_connection()
    raw = connection.connection
    from deletions.targets.http import state_in

    state = state_in(evidence)  # noted on the registration under `prefix`, as the engine's save notes it
    noted: dict[str, Any] = {"prefix": prefix, "incarnation": None, "applied": None}
    if state is not None:
        noted |= {"incarnation": state.incarnation, "applied": state.applied}
    with raw.pipeline():
        first, second = raw.cursor(), raw.cursor()
        first.execute(
            stages.SQL.sql("save_result"), {**saved, **noted, "result": json.dumps(evidence), "action": "completed"}
        )
        second.execute(stages.SQL.sql(then), {**saved, **params})
    if first.fetchone() is None:
        raise RuntimeError(f"floor: save_result found nothing for request {saved['request_id']}")
    found = second.fetchone()
    if found is None:
        raise RuntimeError(f"floor: {then} found nothing for request {saved['request_id']}")
    return cast(tuple[Any, ...], found)


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


def _claimed(cur: Any, claim: str, **params: Any) -> tuple[Any, ...]:
    """The claim's row (`leases.claim_sql`): at the floor nothing else holds the request, so it always finds one."""
    cur.execute(claim, params)
    found = cur.fetchone()
    if found is None:
        raise RuntimeError(f"floor: the claim found nothing for request {params.get('request_id')}")
    return cast(tuple[Any, ...], found)


def _one(statements: Any, cur: Any, name: str, **params: Any) -> tuple[Any, ...]:
    """A fenced statement's row: at the floor nothing else holds the request, so it always finds one."""
    found = statements.one(cur, name, **params)
    if found is None:
        raise RuntimeError(f"floor: {name} found nothing for request {params.get('request_id')}")
    return cast(tuple[Any, ...], found)


def run_all(ids: list[uuid.UUID], owner: str) -> dict[str, Any]:
    done = sum(run(rid, owner) for rid in ids)
    return {"stages": done}
