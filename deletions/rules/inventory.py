"""Target checks, the inventory built from what the target system lists, and its validation. Pure."""

from __future__ import annotations

import re
from typing import Any
from uuid import UUID

from core.errors import shown
from deletions.errors import BadInput, Refused

PREFIX_PATTERN = r"[a-z][a-z0-9_-]{0,38}:"  # a target system's prefix (`models.TargetSystem.prefix`)
MAX_TARGET_CHARS = 200
MAX_COMMUNITIES = 1_000
INVENTORY_VERSION = 1
RULES_DIGEST = r"[0-9a-fA-F]{8,128}"  # the receiver's dataset digest, as its inventory lists it

# The seed's fixed artificial communities: B (participant), then C (former participant).
COMMUNITY_B = "00000000-0000-0000-0000-00000000000b"
COMMUNITY_C = "00000000-0000-0000-0000-00000000000c"


# A target: its system's prefix, then 1-200 printable ASCII characters without surrounding spaces
# (the API's OpenAPI document declares this pattern; `validate_target` applies it everywhere).
TARGET_PATTERN = f"^{PREFIX_PATTERN}[!-~](?:[ -~]{{0,{MAX_TARGET_CHARS - 2}}}[!-~])?$"


def validate_target(target: str) -> str:
    """A target system's prefix (`demo:`, `manual:`, or a registered receiver's) and then 1-200
    printable ASCII characters, without surrounding spaces. Which system takes it is `targets.for_target`'s."""
    prefix = re.match(PREFIX_PATTERN, target) if isinstance(target, str) else None
    if prefix is None:
        raise BadInput(f"target {shown(target)} is refused: it starts with its system's prefix (like demo: or manual:)")
    name = target[prefix.end() :]
    if not 1 <= len(name) <= MAX_TARGET_CHARS:
        raise BadInput(
            f"target {shown(target)} is refused: 1-{MAX_TARGET_CHARS} characters must follow {prefix.group()} "
            f"(got {len(name)})"
        )
    if not re.fullmatch(TARGET_PATTERN, target):
        raise BadInput(
            f"target {shown(target)} is refused: only printable ASCII characters, without surrounding spaces"
        )
    return target


DEMO_COMMUNITIES = 2
# A demo person's inventory lists their own records after their communities, always: one place fewer.
MAX_DEMO_COMMUNITIES = MAX_COMMUNITIES - 1


def check_community_count(communities: int) -> int:
    """How many communities a demo person is given (B and C always first)."""
    if not DEMO_COMMUNITIES <= communities <= MAX_DEMO_COMMUNITIES:
        raise BadInput(
            f"--demo-communities {communities} is refused: give {DEMO_COMMUNITIES}-{MAX_DEMO_COMMUNITIES:,} "
            "(B and C are always the first two, their own records the last place)"
        )
    return communities


def build_inventory(target: str, memberships: list[dict[str, str]]) -> dict[str, Any]:
    """The inventory of a person: the communities (id, role, and the digest of the deletion rules the
    receiver applies there when it says: its dataset file's) the target system lists for them, in its
    order. The digest covers all of it, so an approval binds the rules it was shown."""
    return {
        "version": INVENTORY_VERSION,
        "target": target,
        "communities": [
            {"id": m["id"], "role": m["role"], **({"rules": m["rules"]} if m.get("rules") is not None else {})}
            for m in memberships
        ],
    }


def community_ids(inventory: dict[str, Any]) -> list[str]:
    return [c["id"] for c in inventory.get("communities", [])]


OWN_RECORDS = "own_records"  # the role of a dataset receiver's last place: the person's own records


def own_records_ids(inventory: dict[str, Any]) -> set[str]:
    """The places of an inventory that are the person's own records, in no community: one effect
    (`purge_db`) and never agents."""
    return {c["id"] for c in inventory.get("communities", []) if c.get("role") == OWN_RECORDS}


def validate_inventory(inventory: dict[str, Any]) -> None:
    """Refuse an inventory the v1 rules cannot execute; runs inside the approval transaction."""
    if not isinstance(inventory, dict):
        raise Refused("inventory is not an object")
    if inventory.get("version") != INVENTORY_VERSION:
        raise Refused(
            f"inventory version {inventory.get('version')!r} is not supported (supported: {INVENTORY_VERSION})"
        )
    target = inventory.get("target")
    validate_target(target if isinstance(target, str) else "")
    communities = inventory.get("communities")
    if not isinstance(communities, list) or not communities:
        raise Refused("inventory lists no communities")
    if len(communities) > MAX_COMMUNITIES:
        raise Refused(f"inventory lists {len(communities):,} communities; the limit is {MAX_COMMUNITIES:,}")
    seen: set[str] = set()
    for entry in communities:
        cid = entry.get("id") if isinstance(entry, dict) else None
        try:
            canonical = str(UUID(str(cid)))
        except ValueError:
            raise Refused(f"inventory community id {cid!r} is not a UUID") from None
        if canonical != cid:
            raise Refused(f"inventory community id {cid!r} is not in canonical form")
        if cid in seen:
            raise Refused(f"inventory lists community {cid} twice")
        rules = entry.get("rules")
        if rules is not None and not (isinstance(rules, str) and re.fullmatch(RULES_DIGEST, rules)):
            raise Refused(f"inventory community {cid}: its rules digest {shown(rules)} is not a hex digest")
        seen.add(cid)
