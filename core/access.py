"""Who may see what of a case record: one table, one function (`sees`), for every face.

What a role may *do* is the permissions its group holds (`ops.groups`), checked by each
service; what it may *see* of a stored record is this table. A user's roles are the groups
they are in (a superuser is every role); a staff user in none of them sees what support sees.

| what                     | support | operator | approver | auditor | superuser |
| ------------------------ | ------- | -------- | -------- | ------- | --------- |
| full target identifiers  | masked  | yes      | yes      | yes     | yes       |
| inventory                | yes     | yes      | yes      | yes     | yes       |
| target evidence          | no      | yes      | yes      | yes     | yes       |
| decision reasons         | yes     | yes      | yes      | yes     | yes       |
| the proof (read, export) | no      | no       | yes      | yes     | yes       |

Support reveals a masked target with a reason; the reveal is a decision on the case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SUPPORT, OPERATOR, APPROVER, AUDITOR, SUPERUSER = "support", "operator", "approver", "auditor", "superuser"
ROLES = (SUPPORT, OPERATOR, APPROVER, AUDITOR, SUPERUSER)
TARGETS, INVENTORY, EVIDENCE, REASONS, PROOF = "targets", "inventory", "evidence", "reasons", "proof"
WHAT = (TARGETS, INVENTORY, EVIDENCE, REASONS, PROOF)

TABLE: dict[str, frozenset[str]] = {
    TARGETS: frozenset({OPERATOR, APPROVER, AUDITOR, SUPERUSER}),
    INVENTORY: frozenset(ROLES),
    EVIDENCE: frozenset({OPERATOR, APPROVER, AUDITOR, SUPERUSER}),
    REASONS: frozenset(ROLES),
    PROOF: frozenset({APPROVER, AUDITOR, SUPERUSER}),
}

# The staff groups (ops.groups) and the role each gives.
GROUP_ROLES = {"support (read-only)": SUPPORT, "operators": OPERATOR, "approvers": APPROVER, "auditors": AUDITOR}


def sees(roles: frozenset[str] | set[str], what: str) -> bool:
    """Whether someone with these roles sees `what` of a case record. Pure."""
    if what not in TABLE:
        raise ValueError(f"unknown record part {what!r}")
    return bool(TABLE[what] & set(roles))


def roles_of(user: Any) -> frozenset[str]:
    """The roles of a Django user: a superuser is every role; otherwise one per staff group.
    Read once per request by the caller (one query)."""
    if user is None or not getattr(user, "is_active", False) or not getattr(user, "is_staff", False):
        return frozenset()
    if user.is_superuser:
        return frozenset(ROLES)
    names = user.groups.values_list("name", flat=True)
    return frozenset(GROUP_ROLES[n] for n in names if n in GROUP_ROLES) or frozenset({SUPPORT})


def mask(identifier: str) -> str:
    """A target as support sees it: the system prefix, the first two and last two characters of
    the account (`demo:wo…42`); short accounts show only the prefix."""
    prefix, sep, account = identifier.rpartition(":")
    head = f"{prefix}{sep}"
    if len(account) <= 4:
        return f"{head}…"
    return f"{head}{account[:2]}…{account[-2:]}"


def mask_in(text: str, target: str) -> str:
    """Words that may name a target (an open question, an error) with the target masked."""
    return text.replace(target, mask(target)) if target and target in text else text


# What of a case's data is target evidence: a stage's `evidence` and its metadata's `result` (what
# the target system read and deleted in its own transaction).
EVIDENCE_KEYS = frozenset({"evidence", "result"})


@dataclass(frozen=True)
class Lens:
    """What one reader sees of a case once it is data: built once from their roles, applied once
    where a case becomes data (`data`), so no face masks on its own. Pure."""

    roles: frozenset[str]

    @classmethod
    def of(cls, user: Any) -> Lens:
        return cls(roles_of(user))

    @property
    def targets(self) -> bool:
        return sees(self.roles, TARGETS)

    @property
    def evidence(self) -> bool:
        return sees(self.roles, EVIDENCE)

    def target(self, identifier: str) -> str:
        return identifier if self.targets else mask(identifier)

    def data(self, value: Any, *, target: str) -> Any:
        """`value` (plain data: dicts, lists, strings, numbers) as this reader may see it: the
        target masked wherever it appears, inside any string too, and target evidence withheld
        (its keys kept, their values None) for a reader who may not see them."""
        if self.targets and self.evidence:
            return value
        return self._walk(value, target)

    def _walk(self, value: Any, target: str) -> Any:
        if isinstance(value, str):
            return value if self.targets else mask_in(value, target)
        if isinstance(value, dict):
            return {
                k: None if k in EVIDENCE_KEYS and not self.evidence else self._walk(v, target) for k, v in value.items()
            }
        if isinstance(value, (list, tuple)):
            return [self._walk(v, target) for v in value]
        return value
