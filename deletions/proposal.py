"""What an approver verifies before approving a deletion: per community its name, the
person's role in plain words and what the stages will remove, the rules version and
what the digest covers. Built from the inventory and the target system's preview."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from deletions import targets
from deletions.rules import workflow
from deletions.rules.inventory import community_ids

ROLE_WORDS = {
    "participant": "current member",
    "former_participant": "former member (left the community)",
}


@dataclass(frozen=True)
class CommunityLine:
    position: int
    community_id: str
    name: str
    role: str
    role_words: str
    rows: int
    agents: int
    version: int | None  # the target's data version for the person there, when read


@dataclass(frozen=True)
class Proposal:
    target: str
    inventory_version: int
    rules_version: int
    digest: str
    communities: list[CommunityLine]
    stages: int

    @property
    def short_digest(self) -> str:
        return self.digest[:12]

    @property
    def rows(self) -> int:
        return sum(c.rows for c in self.communities)

    @property
    def agents(self) -> int:
        return sum(c.agents for c in self.communities)

    @property
    def digest_covers(self) -> str:
        return (
            f"the target {self.target}, inventory version {self.inventory_version} and the "
            f"{len(self.communities)} communities listed here with the person's role in each, in this order"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            **{k: v for k, v in asdict(self).items() if k != "communities"},
            "digest_covers": self.digest_covers,
            "rows": self.rows,
            "agents": self.agents,
            "communities": [asdict(c) for c in self.communities],
        }


def build(target: str, inventory: dict[str, Any], digest: str) -> Proposal:
    roles = {c["id"]: c.get("role", "") for c in inventory.get("communities", [])}
    ids = community_ids(inventory)
    seen = targets.for_target(target).preview(target, ids)  # one read of the target system
    lines = []
    for position, cid in enumerate(ids, start=1):
        here = seen.get(cid, {"name": f"(not a community of {target} at the target system)", "rows": 0, "agents": 0})
        role = roles.get(cid, "")
        lines.append(
            CommunityLine(
                position=position,
                community_id=cid,
                name=here["name"],
                role=role,
                role_words=ROLE_WORDS.get(role, role.replace("_", " ") or "unknown role"),
                rows=here["rows"],
                agents=here["agents"],
                version=here.get("version"),
            )
        )
    return Proposal(
        target=target,
        inventory_version=int(inventory.get("version", 0)),
        rules_version=workflow.RULES_VERSION,
        digest=digest,
        communities=lines,
        stages=workflow.stage_count(len(lines)),
    )


def versions(p: Proposal) -> dict[str, int | None]:
    """The data version of each community the approver saw: what each effect's grant expects."""
    return {c.community_id: c.version for c in p.communities}


def of_request(req: Any) -> Proposal:
    return build(req.target, req.inventory_json, req.inventory_digest)


def lines(p: Proposal) -> list[str]:
    """The proposal as the command line prints it."""
    out = [
        f"delete the data of {p.target}: {len(p.communities)} communities, {p.stages} stages, "
        f"about {p.rows} rows and {p.agents} agents (target system preview); rules v{p.rules_version}",
    ]
    for c in p.communities:
        out.append(
            f"  {c.position}. {c.name} ({c.community_id}): {c.role_words}; {c.rows} rows, {c.agents} agents"
            f" (data version {c.version})"
        )
    out.append(f"digest {p.digest} covers {p.digest_covers}")
    return out
