"""What an approver verifies before approving a deletion: per community its name, the
person's role in plain words and what the stages will remove, the deletion rules the receiver
applies there (its dataset file's name, version and digest), the rules version and what the digest
covers. Built from the inventory and the target system's preview."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from deletions import targets
from deletions.models import LATEST_APPROVAL_FIRST
from deletions.rules import workflow
from deletions.rules.inventory import OWN_RECORDS, community_ids
from deletions.targets.base import TargetUnreachable

NOW = "read from the target system now"
ROLE_WORDS = {
    "participant": "current member",
    "former_participant": "former member (left the community)",
    "not_a_member": "not a member (rows only)",
    OWN_RECORDS: "their own records, in no community",
}
SHORT_DIGEST = 12


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
    # The deletion rules the receiver applies there ({"dataset", "version", "digest"}), when it says;
    # `listed_rules` is the dataset digest the inventory listed at submission (what its digest covers).
    rules: dict[str, Any] | None = None
    listed_rules: str = ""
    # What the dataset file keeps there, by table ({table: {"rows", "reason"}}): never deleted, shown with why.
    kept: dict[str, Any] | None = None

    @property
    def kept_words(self) -> str:
        """ "kept: invoices 3 rows (legal retention: 10 years)" ("" when nothing is kept)."""
        if not isinstance(self.kept, dict) or not self.kept:
            return ""
        said = []
        for table, k in sorted(self.kept.items()):
            k = k if isinstance(k, dict) else {"rows": k}
            reason = f" ({k['reason']})" if k.get("reason") else ""
            said.append(f"{table} {k.get('rows', '?')} rows{reason}")
        return "kept: " + "; ".join(said)

    @property
    def rules_words(self) -> str:
        """ "rules: dataset shop v1 (digest 0123456789ab…)", and whether they differ from the inventory's."""
        if not isinstance(self.rules, dict):
            return f"rules: digest {self.listed_rules[:SHORT_DIGEST]}… (as listed)" if self.listed_rules else ""
        digest = str(self.rules.get("digest") or "")
        words = f"rules: dataset {self.rules.get('dataset', '?')} v{self.rules.get('version', '?')}"
        words += f" (digest {digest[:SHORT_DIGEST]}…)" if digest else ""
        if self.listed_rules and digest and digest != self.listed_rules:
            words += f", not the rules the inventory listed (digest {self.listed_rules[:SHORT_DIGEST]}…)"
        return words


@dataclass(frozen=True)
class Proposal:
    target: str
    inventory_version: int
    rules_version: int
    digest: str
    communities: list[CommunityLine]
    stages: int
    source: str = NOW  # where the counts come from: the target now, or an approval's saved preview
    unreadable: str = ""  # why the target could not be read now ("" when it was, or a saved preview was read)

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
            "communities": [
                {**asdict(c), "rules_words": c.rules_words, "kept_words": c.kept_words} for c in self.communities
            ],
        }


def build(
    target: str, inventory: dict[str, Any], digest: str, seen: dict[str, Any] | None = None, source: str = NOW
) -> Proposal:
    """The proposal with what the target shows per community: `seen` as saved by an approval
    (`source` says when), or else read from the target system now (one read)."""
    listed = {c["id"]: c for c in inventory.get("communities", []) if isinstance(c, dict)}
    ids = community_ids(inventory)
    missing = f"(not a community of {target} at the target system)"
    unreadable = ""
    if seen is None:
        try:
            seen = targets.for_target(target).preview(target, ids)
        except TargetUnreachable as exc:
            unreadable = exc.message
            seen, source, missing = {}, f"not readable now: {exc.message}", "(the target system cannot be read now)"
    lines = []
    for position, cid in enumerate(ids, start=1):
        here = seen.get(cid) or {"name": missing, "rows": 0, "agents": 0}
        role = str(listed.get(cid, {}).get("role", ""))
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
                rules=here["rules"] if isinstance(here.get("rules"), dict) else None,
                listed_rules=str(listed.get(cid, {}).get("rules") or ""),
                kept=here["kept"] if isinstance(here.get("kept"), dict) else None,
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
        unreadable=unreadable,
    )


def saved(p: Proposal) -> dict[str, dict[str, Any]]:
    """What an approval saves of the proposal its approver saw: per community rows, agents, the data
    version each effect's grant expects and the deletion rules the receiver applies there (when it says)."""
    return {
        c.community_id: {
            "name": c.name,
            "rows": c.rows,
            "agents": c.agents,
            "version": c.version,
            **({"rules": c.rules} if c.rules is not None else {}),
            **({"kept": c.kept} if c.kept else {}),
        }
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
        rules = "".join(f"; {w}" for w in (c.rules_words, c.kept_words) if w)
        out.append(f"  {c.position}. {c.name} ({c.community_id}): {c.role_words}; {seen}{rules}")
    out.append(f"digest {p.digest} covers {p.digest_covers}")
    return out
