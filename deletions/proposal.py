"""What an approver verifies before approving a deletion: per community its name, the
person's role in plain words and what the stages will remove, the rules version and
what the digest covers. Built from the inventory and the target system's preview."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from deletions import targets
from deletions.models import LATEST_APPROVAL_FIRST
from deletions.rules import workflow
from deletions.rules.inventory import community_ids
from deletions.targets.base import TargetUnreachable

NOW = "read from the target system now"
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
    rows: int | None  # None: the target cannot count them (deleted by hand; the operator counts)
    agents: int | None
    version: int | None  # the target's data version for the person there, when read


@dataclass(frozen=True)
class Proposal:
    target: str
    inventory_version: int
    rules_version: int
    digest: str
    communities: list[CommunityLine]
    stages: int
    source: str = NOW  # where the counts come from: the target now, or an approval's saved preview

    @property
    def short_digest(self) -> str:
        return self.digest[:12]

    @property
    def counted(self) -> bool:
        """The target counted what will be deleted (not so where a person deletes by hand)."""
        return all(c.rows is not None for c in self.communities)

    @property
    def rows(self) -> int:
        return sum(c.rows or 0 for c in self.communities)

    @property
    def agents(self) -> int:
        return sum(c.agents or 0 for c in self.communities)

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
            "counted": self.counted,
            "rows": self.rows,
            "agents": self.agents,
            "communities": [asdict(c) for c in self.communities],
        }


def build(
    target: str, inventory: dict[str, Any], digest: str, seen: dict[str, Any] | None = None, source: str = NOW
) -> Proposal:
    """The proposal with what the target shows per community: `seen` as saved by an approval
    (`source` says when), or else read from the target system now (one read)."""
    roles = {c["id"]: c.get("role", "") for c in inventory.get("communities", [])}
    ids = community_ids(inventory)
    missing = f"(not a community of {target} at the target system)"
    if seen is None:
        try:
            seen = targets.for_target(target).preview(target, ids)
        except TargetUnreachable as exc:
            seen, source, missing = {}, f"not readable now: {exc.message}", "(the target system cannot be read now)"
    lines = []
    for position, cid in enumerate(ids, start=1):
        here = seen.get(cid) or {"name": missing, "rows": 0, "agents": 0}
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
        source=source,
    )


def saved(p: Proposal) -> dict[str, dict[str, Any]]:
    """What an approval saves of the proposal its approver saw: per community rows, agents and the
    data version each effect's grant expects."""
    return {
        c.community_id: {"name": c.name, "rows": c.rows, "agents": c.agents, "version": c.version}
        for c in p.communities
    }


AWAITING_APPROVAL = ("submitted", "needs_review")


def of_request(req: Any) -> Proposal:
    """What an approver verifies: while the request awaits an approval, the target system as it is
    now; once approved, what the approver saw then (the preview beside which the stages' evidence
    is read), from the latest approval."""
    approval = None if req.status in AWAITING_APPROVAL else req.approvals.order_by(*LATEST_APPROVAL_FIRST).first()
    if approval is None or not approval.preview:
        return build(req.target, req.inventory_json, req.inventory_digest)
    when = f"{approval.approved_at:%Y-%m-%d %H:%M} UTC"
    return build(
        req.target,
        req.inventory_json,
        req.inventory_digest,
        seen=approval.preview,
        source=f"as the target system showed it when {approval.approved_by} approved, {when}",
    )


def lines(p: Proposal) -> list[str]:
    """The proposal as the command line prints it."""
    counts = f"about {p.rows} rows and {p.agents} agents" if p.counted else "rows and agents counted by hand"
    out = [
        f"delete the data of {p.target}: {len(p.communities)} communities, {p.stages} stages, "
        f"{counts} ({p.source}); rules v{p.rules_version}",
    ]
    for c in p.communities:
        seen = (
            f"{c.rows} rows, {c.agents} agents (data version {c.version})" if c.rows is not None else "deleted by hand"
        )
        out.append(f"  {c.position}. {c.name} ({c.community_id}): {c.role_words}; {seen}")
    out.append(f"digest {p.digest} covers {p.digest_covers}")
    return out
