"""Plain, frozen snapshots passed between the store and pure policy.

Nothing here touches the database; `decide` functions receive and return
these values only.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from uuid import UUID

# Who a case's `owner` column names when no one person does: the group that must act, or the system.
MANUAL_PREFIX = "manual:"  # targets a person deletes in by hand, in a vendor's console (`targets.manual`)

AGENTS_LEFT = {"yes": True, "no": False}  # purge_db applied by hand: --has-agents / the form's answer


def agents_left(answer: str | None) -> bool | None:
    """A person's "yes" / "no" to "are agents left?" (None when not asked)."""
    return AGENTS_LEFT.get(answer or "")


APPROVERS = "approvers"
OPERATORS_ON_CALL = "operators on call"
SYSTEM = "system"
GROUP_OWNERS = (APPROVERS, OPERATORS_ON_CALL, SYSTEM)
# Who may hold a case a rota answers: the permission of what the case waits for there. The services
# name people by it and the database refuses anyone else (`models.DeletionRequest`'s custody trigger).
ROTA_PERMISSION = {APPROVERS: "deletions.approve_deletionrequest", OPERATORS_ON_CALL: "deletions.run_deletionrequest"}
# Alarms no approval, resume or cancellation clears: the records contradict themselves, or an
# effect was applied by hand after authority was withdrawn. While one is open the case is neither
# approved nor completed; only a person's decision with a reason closes it.
INTEGRITY = "integrity_fault"
AFTER_WITHDRAWAL = "applied_after_withdrawal"
FAULT_ALARMS = (INTEGRITY, AFTER_WITHDRAWAL)
# The states in which a case waits on people: each has a next check, and once the rota named people
# for it, a person and a backup (check constraints). A plain retry or a run is the system's.
WAITING_ON_PEOPLE = ("submitted", "needs_review", "needs_attention")


# The evidence a target system records with an applied effect (what a case believes, read there).
EVIDENCE = (
    "rows_before",
    "rows_deleted",
    "rows_remaining",
    "agents_before",
    "agents_removed",
    "agents_remaining",
    "version_after",
    "applied_at",
    "generation",
    "tables",  # a dataset receiver's count per table: rows before and changed
    "kept",  # a dataset receiver's rows kept by the file's own rules, with their reasons
    "remains",  # the last effect's completeness walk: what remains of the person, by the file's rule that keeps it
    "catalog_walk",  # what that walk read: foreign-key paths, identity columns, anonymized tables checked
    "version_found",
    "fence",
    "min_epoch",
    "dataset",
    "dataset_version",
    "dataset_digest",
    "receipt",  # all of the record as the receiver signed it (a JWS), checkable offline against its key
)


@dataclass(frozen=True)
class Lease:
    request_id: UUID
    owner: str
    generation: int
    expires_at: datetime


@dataclass(frozen=True)
class StageSnapshot:
    id: UUID
    stage: str
    community_id: str | None
    status: str
    is_current: bool
    metadata: dict[str, Any]
    started_at: datetime | None
    finished_at: datetime | None
    last_error: str | None
    operation_id: UUID
    attempts: int
    submitted_at: datetime | None = None

    @property
    def inputs(self) -> Any:
        return self.metadata.get("inputs")

    @property
    def result(self) -> Any:
        return self.metadata.get("result")

    @property
    def evidence(self) -> dict[str, Any]:
        """What the target system recorded where it applied this stage's effect (none until then)."""
        result = self.result if isinstance(self.result, dict) else {}
        return {k: result[k] for k in EVIDENCE if k in result}

    @property
    def decision(self) -> Any:
        return self.metadata.get("decision")

    @property
    def previous_stage_id(self) -> str | None:
        return self.metadata.get("previous_stage_id")


@dataclass(frozen=True)
class Believed:
    """A stage's effect as the target system recorded it, believed (its evidence verified, nothing in it
    contradicting the row): what the transition saves together with the next step, one restart point."""

    row: StageSnapshot  # the running row the effect was applied for
    evidence: dict[str, Any]
    # (the receiver's registration prefix, its incarnation, its applied count) the evidence carries, noted
    # with it; None for a target that keeps no state (a manual one)
    receiver_state: tuple[str, str, int] | None = None

    def completed(self) -> StageSnapshot:
        """The row as saving the evidence makes it (what the rules decide the next step from)."""
        return replace(self.row, status="completed", metadata={**self.row.metadata, "result": self.evidence})


@dataclass(frozen=True)
class RequestSnapshot:
    id: UUID
    status: str
    inventory: dict[str, Any] | None  # None when the transition decides from the current row and the run's plan
    inventory_version: int
    retry_count: int
    next_attempt_at: datetime | None
    cancel_requested: bool


@dataclass(frozen=True)
class AuthorityFacts:
    """What the receiving boundary rechecks with every effect: read under the request lock, with
    the run's own inventory (its digest and communities, as its claim read them) laid over by the
    receiver."""

    now: datetime
    status: str
    cancel_requested: bool
    stored_digest: str
    inventory_version: int
    rules_version: int
    approval_id: UUID | None
    approval_digest: str | None
    approval_inventory_version: int | None
    approval_rules_version: int | None
    approval_expires_at: datetime | None
    approval_revoked_at: datetime | None
    approver: str
    approver_may: bool
    requester: str
    requester_may: bool
    same_person: bool
    # Where the effect lands: its community, and the data version the approval saw there and the
    # one the case's own previous effect there reported.
    community_id: str | None = None
    approved_version: int | None = None
    previous_version: int | None = None
    lease_expires_at: datetime | None = None
    epoch: int = 0  # how many times authority over the request was withdrawn (revoked, cancelled)
    # The first stage's (the gate's): every approved community's data version, as the approval saw it.
    expected_versions: dict[str, int] | None = None
    # The inventory the run acts on: its digest, recomputed from what its claim read ("" matches
    # none), and its communities.
    run_digest: str = ""
    run_communities: Container[str] = ()


# Operations a decide function may return.
@dataclass(frozen=True)
class NewStage:
    stage: str
    community_id: str | None
    inputs: dict[str, Any]


@dataclass(frozen=True)
class Initialize:
    first: NewStage


@dataclass(frozen=True)
class Resume:
    stage_id: UUID


@dataclass(frozen=True)
class Advance:
    completed_stage_id: UUID
    decision: dict[str, Any]
    successor: NewStage | None


@dataclass(frozen=True)
class AlreadyFinished:
    pass


@dataclass(frozen=True)
class WaitUntil:
    at: datetime


@dataclass(frozen=True)
class EndCancelled:
    """A recorded cancellation ends the request at this boundary; completed stages stay done."""


Operation = Initialize | Resume | Advance | AlreadyFinished | WaitUntil | EndCancelled


# What transition_stage hands back to the worker.
@dataclass(frozen=True)
class Finished:
    status: str
    completed_stages: int = 0
    note: str = ""
    lease_released: bool = False  # the completing transaction released the lease too


@dataclass(frozen=True)
class RetryDecision:
    """What a failed attempt does to the request (from the pure retry policy)."""

    next_attempt_at: datetime | None
    needs_attention: bool


@dataclass(frozen=True)
class Custody:
    """Who holds a case, what it asks and when it is looked at next (decided by `rules.custody`)."""

    owner: str
    open_question: str
    next_check_at: datetime | None


@dataclass(frozen=True)
class CancelFacts:
    """What a cancellation meets, read under the request lock."""

    worker_live: bool  # a lease that has not run out (its worker may be about to send)
    unsettled: tuple[UUID, str] | None  # (operation, stage) submitted and never settled
    started: bool  # any stage row exists
    completed: int  # stages completed


@dataclass(frozen=True)
class CancelPlan:
    """What policy decided a cancellation does now (the store writes it as given)."""

    ends_now: bool
    action: str  # the case's last action
    custody: Custody | None  # who holds it while it stays open to settle a submission (None: unchanged)


@dataclass(frozen=True)
class FailurePlan:
    """What policy decided a failed attempt does to the case (the store writes it as given)."""

    decision: RetryDecision
    status: str  # retry_wait | needs_attention
    owner: str
    open_question: str
    next_check_at: datetime | None
    alarm: bool  # an unknown effect: the owner is alerted


NextStage = StageSnapshot | Finished | WaitUntil


def chain_order(rows: list[StageSnapshot]) -> list[StageSnapshot]:
    """Rows in previous_stage_id order from the root; unlinked rows last."""
    by_prev: dict[str | None, list[StageSnapshot]] = {}
    for r in rows:
        by_prev.setdefault(r.previous_stage_id, []).append(r)
    ordered: list[StageSnapshot] = []
    seen: set[UUID] = set()
    frontier = by_prev.get(None, [])
    while frontier:
        row = frontier.pop(0)
        if row.id in seen:
            continue
        seen.add(row.id)
        ordered.append(row)
        frontier = by_prev.get(str(row.id), []) + frontier
    return ordered + [r for r in rows if r.id not in seen]
