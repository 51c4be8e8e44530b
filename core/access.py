"""Who may see what of a case record: one table, one function (`sees`), for every face.

What a role may *do* is the permissions its group holds (`ops.groups`), checked by each
service; what it may *see* of a stored record is this table. A user's roles are the groups
they are in (a superuser is every role); a staff user in none of them sees what support sees.

| what                     | support | operator | approver | auditor | superuser |
| ------------------------ | ------- | -------- | -------- | ------- | --------- |
| full target identifiers  | masked  | yes      | yes      | yes     | yes       |
| inventory digest         | no      | yes      | yes      | yes     | yes       |
| inventory                | yes     | yes      | yes      | yes     | yes       |
| target evidence          | no      | yes      | yes      | yes     | yes       |
| decision reasons         | masked  | yes      | yes      | yes     | yes       |
| the proof (read, export) | no      | no       | yes      | yes     | yes       |

Support reveals a masked target with a reason; the reveal is a decision on the case.

Nothing a masked reader meets may confirm a guess of the person (no oracle):

- **Free text** (reasons, evidence notes, errors, open questions, alarms) reaches them through the
  lens, which masks every occurrence of the target and of its account part alone, whatever its
  letter case (`mask_in`): "customer jane@example.com wrote in" reads "customer ja…om wrote in".
- **The inventory digest** is not shown to them (`DIGEST_KEYS`, withheld like evidence): it is an
  unkeyed SHA-256 over canonical JSON holding the full target, so a guessed address would be
  confirmed offline. Approvals still bind to it; those who approve see it.
- **Search.** A masked reader finds a case by its id (which the person receives) or by the masked
  form exactly as shown (`mask_pattern`: `demo:ja…om` finds every case shown so); never by the
  person's address, in full or in part, nor by the words of a decision: any answer to such a
  search would confirm that the person has a case, so a full address matches nothing, exactly as a
  wrong guess does (same rows, same page, same CSV). Roles that see targets search the target, the
  submitter and the decisions' words as before.
- **Refusals** say only what the caller may know: a duplicate submission by a caller who may not
  see targets is refused without the existing case's id, status or target.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

SUPPORT, OPERATOR, APPROVER, AUDITOR, SUPERUSER = "support", "operator", "approver", "auditor", "superuser"
ROLES = (SUPPORT, OPERATOR, APPROVER, AUDITOR, SUPERUSER)
TARGETS, INVENTORY, EVIDENCE, REASONS, PROOF = "targets", "inventory", "evidence", "reasons", "proof"
DIGEST = "digest"
WHAT = (TARGETS, DIGEST, INVENTORY, EVIDENCE, REASONS, PROOF)

TABLE: dict[str, frozenset[str]] = {
    TARGETS: frozenset({OPERATOR, APPROVER, AUDITOR, SUPERUSER}),
    DIGEST: frozenset({OPERATOR, APPROVER, AUDITOR, SUPERUSER}),  # derived from the full target
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
    """Free text (a reason, an open question, an error, an evidence note) with every occurrence of
    the target masked, and of its account part alone (`jane@example.com` of `demo:jane@example.com`
    and of `manual:crm/jane@example.com`), whatever the letter case: each as `mask` shows it."""
    if not target or not text:
        return text
    account = target.rpartition(":")[2]
    name = account.rpartition("/")[2]  # `manual:crm/jane@example.com`: the account in that system
    masks = {target.casefold(): mask(target), account.casefold(): mask(account), name.casefold(): mask(name)}
    words = sorted({target, account, name} - {""}, key=len, reverse=True)  # the longest first
    pattern = re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE)
    return pattern.sub(lambda m: masks.get(m.group().casefold(), mask(account)), text)


ELLIPSIS = "…"


def mask_pattern(term: str) -> str | None:
    """The search a masked reader's term makes over the upper-cased targets (a PostgreSQL regular
    expression, also Python's): the targets `mask` shows exactly as `term` (`...` may stand for `…`),
    whatever the letter case; None when `term` is no masked form (it then finds no target). Pure."""
    term = term.strip().replace("...", ELLIPSIS).upper()
    head, sep, tail = term.partition(ELLIPSIS)
    if not sep or ELLIPSIS in tail or ":" in tail:
        return None

    def literal(text: str) -> str:
        return "".join(c if c.isalnum() else f"\\{c}" for c in text)

    if not tail:  # a short account (4 characters or fewer): only its system shows
        return f"^{literal(head)}[^:]{{0,4}}$" if head.endswith(":") or not head else None
    if len(tail) != 2 or len(head.rpartition(":")[2]) != 2:
        return None
    return f"^{literal(head)}[^:]+{literal(tail)}$"  # an account of 5 characters or more


# What of a case's data is target evidence: a stage's `evidence` and its metadata's `result` (what
# the target system read and deleted in its own transaction).
EVIDENCE_KEYS = frozenset({"evidence", "result"})
# What is derived from the full target and confirms a guess of it offline: the inventory's digest
# (an approval's, a proposal's, a case's). Every `digest` key, the rules' dataset digest with them.
DIGEST_KEYS = frozenset({"inventory_digest", "digest", "short_digest"})
# ... and in free text (an approval's reason quotes the digest it approved): any SHA-256 in hex.
SHA256 = re.compile(r"\b[0-9a-fA-F]{64}\b")
DIGEST_NOT_SHOWN = "(digest not shown)"


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

    @property
    def digest(self) -> bool:
        return sees(self.roles, DIGEST)

    def target(self, identifier: str) -> str:
        return identifier if self.targets else mask(identifier)

    def withheld(self, key: str) -> bool:
        """Whether a value under this key is kept from this reader (target evidence, the digest)."""
        return (key in EVIDENCE_KEYS and not self.evidence) or (key in DIGEST_KEYS and not self.digest)

    def data(self, value: Any, *, target: str) -> Any:
        """`value` as this reader may see it: the target masked wherever it appears, inside any
        string too (`mask_in`), and target evidence and the digest withheld (their keys kept, their
        values None) for a reader who may not see them. Plain data (dicts, lists, strings, numbers,
        times, ids) is copied so; any other object (a row, a dataclass a page renders) is wrapped
        (`Seen`): each attribute read through it goes through the lens the same way."""
        if self.targets and self.evidence and self.digest:
            return value
        return self._walk(value, target)

    def _walk(self, value: Any, target: str) -> Any:
        if isinstance(value, str):
            text = value if self.targets else mask_in(value, target)
            return text if self.digest else SHA256.sub(DIGEST_NOT_SHOWN, text)  # an approval's words name it
        if isinstance(value, dict):
            return {k: None if self.withheld(str(k)) else self._walk(v, target) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._walk(v, target) for v in value]
        if value is None or isinstance(value, PLAIN) or callable(value):
            return value
        return Seen(value, self, target)


PLAIN = (bool, int, float, Decimal, datetime, date, time, timedelta, UUID, bytes)


class Seen:
    """An object a page renders (a case, a decision, an attempt, a panel) as one reader sees it:
    each attribute read through it passes the lens (`Lens.data`). Methods are the object's own."""

    def __init__(self, wrapped: Any, lens: Lens, target: str) -> None:
        self._wrapped, self._lens, self._target = wrapped, lens, target

    def __getattr__(self, name: str) -> Any:
        if self._lens.withheld(name):
            return None
        return self._lens._walk(getattr(self._wrapped, name), self._target)

    def __str__(self) -> str:
        return str(self._lens._walk(str(self._wrapped), self._target))

    def __eq__(self, other: object) -> bool:
        return bool(self._wrapped == (other._wrapped if isinstance(other, Seen) else other))

    def __hash__(self) -> int:
        return hash(self._wrapped)
