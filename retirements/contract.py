"""Plain, frozen values passed between the retirement store and its pure policy, and the names
both speak (notice kinds, verdict actions). Nothing here touches the database."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

ROTA = "operators on call"  # who may own or cover a retirement: the operators allowed to hold one

REQUEST_RECEIVED = "request_received"
REMINDER_7_DAYS = "reminder_7_days"
FINAL_WARNING = "final_warning"
DESTRUCTION_STARTED = "destruction_started"
PLANNED_NOTICES = (REQUEST_RECEIVED, REMINDER_7_DAYS, FINAL_WARNING)  # the waiting period's plan
# A staff notice for each decision that changes a retirement's course (seed 002: the retained
# notices are how hops 5 and 6 are observed), due when it is taken, never gating.
DECISION_NOTICES = {
    "hold": "held",
    "release": "released",
    "cancel": "cancelled",
    "boundary_hold": "held_at_point_of_no_return",
    "boundary_close": "closed_at_point_of_no_return",
}

# A retirement's alarms. Each but one is closed by the state move that answers it (its writer
# resolves it in the same transaction); what a refusal names for it:
NOTICE_FAILED_ALARM = "notice_failed"
STALLED_ALARM = "watcher_stalled"
FAILING_ALARM = "watcher_failing"  # alive (it beats), but each step fails: `policy.failing`
WATCHER_AGE, HOLD_AGE = "watcher_lifetime", "hold_too_long"
BOUNDARY_HOLD_ALARM = "held_at_point_of_no_return"  # open until the hold is released or the case cancelled
PURGE_REFUSED_ALARM = "purge_refused"
STALE_EXECUTOR_ALARM = "purge_stale_executor"  # a late executor was rejected: why was it paused past its lease?
ANSWERED_BY_A_MOVE = {
    NOTICE_FAILED_ALARM: "retry_notices (the failed notice sent again)",
    STALLED_ALARM: "resume_retirement (a new watcher)",
    FAILING_ALARM: "the watcher's next step that succeeds",
    WATCHER_AGE: "the request leaving its wait (cancel_retirement, or its point of no return)",
    HOLD_AGE: "release_retirement or cancel_retirement",
    BOUNDARY_HOLD_ALARM: "release_retirement or cancel_retirement",
    PURGE_REFUSED_ALARM: "retry_purge or close_retirement",
}
# The alarms no state move answers: a named person closes one with what they found
# (`close_retirement_alarm`, a decision on the case that the alarm row names).
CLOSED_BY_A_PERSON = (STALE_EXECUTOR_ALARM,)


@dataclass(frozen=True)
class Eligibility:
    policy: str
    eligible_at: datetime


@dataclass(frozen=True)
class PlannedNotice:
    kind: str
    due_at: datetime
    gating: bool
    why: str = ""  # why a re-plan adds it (saved as the slot's `moved_because`); "" in the first plan


@dataclass(frozen=True)
class SlotView:
    id: int
    kind: str
    due_at: datetime
    status: str
    next_attempt_at: datetime | None = None
    claim_expires_at: datetime | None = None
    delivered_at: datetime | None = None


@dataclass(frozen=True)
class Replan:
    eligible_at: datetime
    moved: list[tuple[int, datetime]]  # (slot id, new due time)
    added: list[PlannedNotice]
    suppressed: list[int]
    next_wake_at: datetime  # when the watcher has something to do, with the notices as re-planned
    why_suppressed: dict[int, str] = field(default_factory=dict)  # slot id: why it is no longer sent
    why_moved: str = ""  # why the moved slots moved (saved with each move as its `moved_because`)


@dataclass(frozen=True)
class NoticeRetry:
    exhausted: bool
    next_attempt_at: datetime | None


@dataclass(frozen=True)
class NoticeClaim:
    """A notice slot claimed for its send, and the claim's generation: what the sender re-checks
    just before the send, and what its saved outcome is fenced on."""

    slot_id: int
    kind: str
    generation: int


@dataclass(frozen=True)
class BoundaryFacts:
    """What the point of no return rechecks, read under the request and workspace locks."""

    now: datetime
    request_status: str
    eligible_at: datetime
    watcher_is_authoritative: bool
    workspace_lifecycle: str
    legal_hold: bool
    protected_reason: str
    undelivered_gating: tuple[str, ...]
    requester: str
    requester_active: bool
    requester_staff: bool
    requester_permitted: bool


PROCEED = "proceed"  # create the purge job: executing / deleting
WAIT = "wait"  # temporary blocker or not yet eligible: wake again later
HOLD = "hold"  # lost authority: put the request on hold with the reason
CLOSE = "close"  # cannot proceed: close the request without purge
SUPERSEDED = "superseded"  # this watcher is not authoritative: settle it, touch nothing
CONCLUDE = "conclude"  # the request no longer waits (cancelled, completed...): settle the watcher
SLEEP = "sleep"  # on hold: nothing to do until a release
NOT_YET_ELIGIBLE = "not yet eligible"


@dataclass(frozen=True)
class Verdict:
    action: str
    reason: str
    wake_at: datetime | None = None
    blocker: str = ""  # a WAIT on something other than the time: the case shows it until it clears


@dataclass(frozen=True)
class PurgeFacts:
    """What the purge's receiving boundary rechecks in the transaction of the effect."""

    job_status: str
    holder: str  # the job's lease owner now
    holder_generation: int
    owner: str  # who asks to apply
    generation: int
    job_operation_id: object
    operation_id: object
    request_status: str
    requester: str
    requester_may: bool


APPLY = "apply"
ALREADY_DONE = "already done"  # the operation was applied: its first outcome stands
STALE = "stale"  # fencing: another executor owns the job now; nothing applied
REFUSE = "refuse"  # authority: nothing applied, a person must look
