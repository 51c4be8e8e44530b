"""User workflow rules v1 and community-progress reconstruction. Pure.

| Stage          | Allowed outcome                        | Runtime choice                          |
| gate_user      | enter communities                      | first uncovered community               |
| purge_db       | purge_agents or community complete     | saved boolean result.has_agents         |
| purge_agents   | community complete                     | mark this community covered             |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deletions.contract import NewStage, StageSnapshot
from deletions.errors import WorkflowError
from deletions.rules.inventory import MAX_COMMUNITIES, community_ids

GATE_USER = "gate_user"
PURGE_DB = "purge_db"
PURGE_AGENTS = "purge_agents"
STAGES = (GATE_USER, PURGE_DB, PURGE_AGENTS)

ENTER_COMMUNITIES = "enter_communities"
COMMUNITY_COMPLETE = "community_complete"
RULES_VERSION = 1
SUPPORTED_INVENTORY_VERSIONS = (1,)


def stage_count(communities: int) -> int:
    """Stages a request of this many communities runs at most: the gate, then two per community
    (a community without agents skips its second)."""
    return 1 + 2 * communities


def transition_for(stage: str, result: Any) -> str:
    """The outcome a completed stage's saved result allows under rules v1."""
    if stage == GATE_USER:
        return ENTER_COMMUNITIES
    if stage == PURGE_DB:
        has_agents = result.get("has_agents") if isinstance(result, dict) else None
        if not isinstance(has_agents, bool):
            raise WorkflowError(f"purge_db result {result!r} has no boolean has_agents; refusing to guess a branch")
        return PURGE_AGENTS if has_agents else COMMUNITY_COMPLETE
    if stage == PURGE_AGENTS:
        return COMMUNITY_COMPLETE
    raise WorkflowError(f"unknown stage {stage!r} (rules v{RULES_VERSION} know {', '.join(STAGES)})")


def decision(stage: str, result: Any) -> dict[str, Any]:
    return {"transition": transition_for(stage, result), "rules_version": RULES_VERSION}


def initial_stage(target: str) -> NewStage:
    return NewStage(stage=GATE_USER, community_id=None, inputs={"target": target})


@dataclass(frozen=True)
class Plan:
    """The approved inventory's communities in order, with each one's position: read once per run.

    Rules v1 take communities in inventory order, so what is covered is always a prefix:
    the community after the current one is next. No history replay is needed to find it.
    """

    target: str
    communities: tuple[str, ...]
    position: dict[str, int]
    # The digest of the inventory as the run's claim read it: every grant compares it with the saved
    # digest and the approval's, so a run acts only on the approved inventory ("" matches none).
    digest: str = ""

    @classmethod
    def of(cls, inventory: dict[str, Any], digest: str = "") -> Plan:
        ids = tuple(community_ids(inventory))
        return cls(inventory["target"], ids, {cid: i for i, cid in enumerate(ids)}, digest)


def successor(transition: str, community_id: str | None, plan: Plan) -> NewStage | None:
    """The next stage after a transition; None when every community is covered."""
    if transition == PURGE_AGENTS:
        assert community_id is not None
        return _community_stage(PURGE_AGENTS, community_id, plan.target)
    following = 0 if community_id is None else plan.position[community_id] + 1
    if following < len(plan.communities):
        return _community_stage(PURGE_DB, plan.communities[following], plan.target)
    return None


def advance(stage: str, community_id: str | None, result: Any, plan: Plan) -> tuple[dict[str, Any], NewStage | None]:
    """What a completed stage's saved result decides: (the decision to save, the successor or None)."""
    chosen = decision(stage, result)
    return chosen, successor(chosen["transition"], community_id, plan)


def _community_stage(stage: str, community_id: str, target: str) -> NewStage:
    return NewStage(stage=stage, community_id=community_id, inputs={"target": target, "community_id": community_id})


@dataclass(frozen=True)
class Progress:
    chain: list[StageSnapshot]
    covered: list[str]
    current: StageSnapshot | None


def reconstruct(
    history: list[StageSnapshot],
    inventory: dict[str, Any],
    inventory_version: int,
    *,
    max_communities: int = MAX_COMMUNITIES,
) -> Progress:
    """Follow previous_stage_id from the current row back to the root and replay rules v1.

    Checks every row's stage, community and inputs against the approved
    inventory and every saved decision against its saved result. Unknown
    stages, disconnected history and missing results fail; nothing is invented.
    """
    if inventory_version not in SUPPORTED_INVENTORY_VERSIONS:
        raise WorkflowError(f"inventory version {inventory_version} has no workflow rules here")
    if len(community_ids(inventory)) > max_communities:
        raise WorkflowError(f"inventory has more than {max_communities:,} communities")
    if not history:
        return Progress(chain=[], covered=[], current=None)
    current = [s for s in history if s.is_current]
    if len(current) != 1:
        raise WorkflowError(f"history has {len(history)} stage(s) and {len(current)} current; expected exactly one")
    chain = _walk_back(current[0], {str(s.id): s for s in history})
    if len(chain) != len(history):
        raise WorkflowError(f"disconnected history: {len(history) - len(chain)} stage(s) are not on the chain")
    plan = Plan.of(inventory)
    covered: list[str] = []
    expected: NewStage | None = initial_stage(inventory["target"])
    for row in chain:
        _check_row(row, expected)
        if row is chain[-1]:
            break
        if row.status != "completed" or row.result is None:
            raise WorkflowError(f"stage {row.id} ({row.stage}) was transitioned without a saved result")
        saved = row.decision.get("transition") if isinstance(row.decision, dict) else None
        allowed = transition_for(row.stage, row.result)
        if saved != allowed:
            raise WorkflowError(f"stage {row.id} saved transition {saved!r} but its result allows {allowed!r}")
        if saved == COMMUNITY_COMPLETE and row.community_id is not None:
            covered.append(row.community_id)
        expected = successor(saved, row.community_id, plan)
    return Progress(chain=chain, covered=covered, current=chain[-1])


def _walk_back(tip: StageSnapshot, by_id: dict[str, StageSnapshot]) -> list[StageSnapshot]:
    chain = [tip]
    seen = {str(tip.id)}
    node = tip
    while node.previous_stage_id is not None:
        prev = str(node.previous_stage_id)
        if prev not in by_id:
            raise WorkflowError(f"disconnected history: stage {node.id} points to missing stage {prev}")
        if prev in seen:
            raise WorkflowError(f"disconnected history: a cycle through stage {prev}")
        seen.add(prev)
        node = by_id[prev]
        chain.append(node)
    chain.reverse()
    return chain


def _check_row(row: StageSnapshot, expected: NewStage | None) -> None:
    if row.stage not in STAGES:
        raise WorkflowError(f"unknown stage {row.stage!r} in stage {row.id}")
    if expected is None:
        raise WorkflowError(f"stage {row.id} ({row.stage}) follows a finished workflow")
    if (row.stage, row.community_id) != (expected.stage, expected.community_id):
        raise WorkflowError(
            f"stage {row.id} is {row.stage} for {row.community_id}; rules v{RULES_VERSION} expected "
            f"{expected.stage} for {expected.community_id}"
        )
    if row.inputs != expected.inputs:
        raise WorkflowError(f"stage {row.id} inputs {row.inputs!r} disagree with the approved inventory")
