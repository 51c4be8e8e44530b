"""The deletion case as a support lead reads it: panel, inventory, chain picture. Pure."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from core import present
from core.present import CasePanel, Offer, Story, offer
from deletions import contract
from deletions.contract import GROUP_OWNERS, StageSnapshot, chain_order
from deletions.rules import custody
from deletions.rules.inventory import community_ids, own_records_ids
from deletions.rules.workflow import stage_count


@dataclass
class Box:
    label: str
    # completed | running | pending | failed | not_started | skipped | effect_unknown | needs_review | needs_attention
    status: str
    detail: str = ""

    @property
    def status_label(self) -> str:
        return self.status.replace("_", " ")


@dataclass
class Lane:
    title: str
    boxes: list[Box] = field(default_factory=list)


def lease_live(req: Any, now: datetime) -> bool:
    """A worker holds the case now: its heartbeat keeps the lease ahead of the clock."""
    return req.lease_owner is not None and req.lease_expires_at is not None and req.lease_expires_at > now


def may_hold(req: Any, user: Any) -> bool:
    """A deletion's submitter never holds it, as person or backup, whatever it waits for: its
    approval is four eyes, and so is its one action at a supervised target (recording the effect),
    so a cover who could not act is no cover (the database refuses it too). Nor does a case wait on
    them through a rota they are on: the inbox and the notifications read this too."""
    return req.requested_by_user_id is None or user.pk != req.requested_by_user_id


SILENT_BEATS = 3  # heartbeats a worker may miss before it reads "not reporting"


def heartbeat_period() -> timedelta:
    """How often a worker holding a case reports (`DELETION_HEARTBEAT_SECONDS`)."""
    from django.conf import settings

    return timedelta(seconds=settings.DELETION_HEARTBEAT_SECONDS)


def silent_since(req: Any, now: datetime) -> datetime | None:
    """The last report of the worker holding the case once it has missed three heartbeats: it is
    "not reporting since" then. None while it reports on time, or while no worker holds the case."""
    beat = getattr(req, "heartbeat_at", None)
    if not lease_live(req, now) or beat is None:
        return None
    return beat if now - beat >= SILENT_BEATS * heartbeat_period() else None


SYSTEM_RUNS = ("approved", "running", "retry_wait")  # the states in which the workers move a case


def effect_unknown(req: Any, now: datetime, unsettled: bool) -> bool:
    """The one rule for "effect unknown", which every face reads (through `story`): while the
    workers run the case, the current stage's effect was submitted and not settled (`unsettled`),
    and no worker that reports holds it (its lease lapsed, or it missed three heartbeats). A worker
    reporting on time is still waiting for its answer: that is running, not unknown. A case waiting
    on a person (an effect handed to one, a case needing attention) says what it asks instead."""
    return unsettled and req.status in SYSTEM_RUNS and (not lease_live(req, now) or heartbeat_late(req, now))


def queued(req: Any, now: datetime, unsettled: bool) -> bool:
    """Waiting for a free worker: approved or running with no worker holding it and no effect left
    unsettled, or a plain retry that is due. The one rule the panel, the list, the overview, the
    metrics and health read ("queued" is never "overdue" and never "effect unknown")."""
    if lease_live(req, now) or unsettled:
        return False
    if req.status in ("approved", "running"):
        return True
    due = req.next_attempt_at is not None and req.next_attempt_at <= now
    return req.status == "retry_wait" and not req.open_question and due


def queued_since(req: Any) -> datetime:
    """Since when a queued case has waited: its last move (approval, a released lease) or its retry time."""
    return max(t for t in (req.updated_at, req.next_attempt_at, req.lease_expires_at) if t is not None)


def open_question(req: Any, now: datetime, unsettled: bool = False) -> str:
    """What the case asks now. A running case without a live lease is queued for the next free
    worker, unless its current stage's effect was submitted and not settled: only then is its
    effect unknown."""
    if req.open_question:
        return str(req.open_question)
    if req.status == "submitted":
        return custody.AWAITING_APPROVAL
    if req.cancel_requested_at is not None and req.status not in ("cancelled", "completed"):
        return "cancellation recorded; the worker stops at its next transition"
    if req.status == "running" and effect_unknown(req, now, unsettled):
        beat = getattr(req, "heartbeat_at", None)
        since = f"not reporting since {present.absolute(beat)}: " if beat is not None else ""
        if not lease_live(req, now):
            return (
                f"{since}the worker stopped after submitting the current stage's operation; its effect is unknown "
                "until the next worker looks it up at the target"
            )
        return (
            f"{since}the {present.worker(req.lease_owner)} submitted the current stage's operation and stopped "
            f"reporting, so its effect is unknown; when its lease lapses at {present.absolute(req.lease_expires_at)} "
            "the next worker looks the operation up at the target (it is never resent blindly)"
        )
    if req.status in ("approved", "running") and heartbeat_late(req, now):
        return (
            f"not reporting since {present.absolute(req.heartbeat_at)}: the {present.worker(req.lease_owner)} holds "
            f"the case; if it does not report by {present.absolute(req.lease_expires_at)}, another worker takes "
            "over and goes on from the saved stage"
        )
    if queued(req, now, unsettled):
        waited = int((now - queued_since(req)).total_seconds())
        return f"queued, waiting for a free worker (for {present.span(max(waited, 0))})"
    return ""


APPROVERS = "approvers (group)"
ON_CALL = "operators on call (group)"


def responsible(req: Any, now: datetime, unsettled: bool = False) -> str:
    """Who must act next, from the case's state; never the submitter for an approval. Pure.

    | state                                          | responsible                                 |
    | submitted, needs_review                        | the approvers                               |
    | approved / running with a live lease           | the system: the worker holding it, by host  |
    | the same, its worker silent, an effect unsettled | the operators on call (effect unknown)    |
    | approved, no worker yet                        | the system: the dispatcher, next run        |
    | running, no live lease, nothing unsettled      | the system: the next free worker (queued)   |
    | running, no live lease, an effect unsettled    | the operators on call                       |
    | retry_wait (plain retry)                       | the system, at the retry time               |
    | retry_wait (effect unknown)                    | the named owner, else the operators on call |
    | needs_attention, held for the approvers        | the approvers (revoked; applied after that) |
    | needs_attention                                | the named owner, else the operators on call |
    | completed, cancelled                           | nobody                                      |
    """
    if req.status in ("submitted", "needs_review"):
        return APPROVERS
    if req.status in ("approved", "running") and lease_live(req, now):
        if effect_unknown(req, now, unsettled):
            return ON_CALL  # silent after it submitted: whoever acts next, the effect is in question
        beat = getattr(req, "heartbeat_at", None)
        since = f", heartbeat {beat:%H:%M:%S}" if beat else ""
        if beat is not None and heartbeat_late(req, now):
            since = f", not reporting since {beat:%H:%M:%S}"  # until when: the open question says it, once
        return f"the system ({present.worker(req.lease_owner)}{since})"
    if req.status == "approved":
        return "system: the next worker (dispatcher)"
    if req.status == "running":
        # A worker was lost after it submitted: someone should look if no replacement settles it.
        return ON_CALL if unsettled else "system: the next free worker (queued)"
    if req.status == "retry_wait" and not req.open_question:
        return "system: retry at the next attempt"
    if req.status == "needs_attention" and req.owner == contract.APPROVERS:
        return APPROVERS  # an approval revoked while it waited, or an effect applied after that
    if req.status in ("retry_wait", "needs_attention"):
        person = req.owner if req.owner and req.owner not in (req.requested_by, *GROUP_OWNERS) else ""
        return person or ON_CALL
    return "-"


def rota_for(req: Any, now: datetime, unsettled: bool = False) -> str | None:
    """The rota whose person must act now (`contract.APPROVERS`, `contract.OPERATORS_ON_CALL`), or
    None while the system runs the case or it has ended: `responsible`'s rule, as a rota."""
    who = responsible(req, now, unsettled)
    if who == APPROVERS:
        return contract.APPROVERS
    if who == "-" or who.startswith(("the system", "system:")):
        return None
    return contract.OPERATORS_ON_CALL  # the operators on call, or a named operator among them


def custody_key(req: Any, now: datetime, unsettled: bool = False) -> str:
    """What a case's person and backup are named for: its state and the rota that answers it. A
    case whose key changed is named again (`services.deletion_name_by_rota`)."""
    return f"{req.status}:{rota_for(req, now, unsettled) or contract.SYSTEM}"


@dataclass(frozen=True)
class Custodians:
    """The person and backup a case names now (usernames), or None with why nobody is named."""

    person: str | None
    backup: str | None
    why: str

    def words(self) -> str:
        if self.person is None:
            return self.why
        return f"{self.person} (backup: {self.backup or 'none on the rota'})"


def custodians(req: Any, now: datetime, unsettled: bool = False) -> Custodians:
    """Who holds the case: the person and backup named for its current state, else why none is."""
    key = custody_key(req, now, unsettled)
    rota = rota_for(req, now, unsettled)
    if rota is None:
        who = responsible(req, now, unsettled)
        return Custodians(None, None, "the case has ended" if who == "-" else who)  # the system runs it
    if req.assigned_for == key and req.assignee_id is not None:
        backup = req.backup.get_username() if req.backup_id is not None else None
        return Custodians(req.assignee.get_username(), backup, "")
    return Custodians(None, None, f"{rota} (group): nobody named yet")


def days_left(req: Any, now: datetime) -> int:
    """Whole days until the legal deadline, counted up (due later today: 1 day left when under a
    day remains; 0 and below once it passed: -2 is two days late)."""
    seconds = (req.due_at - now).total_seconds()
    return math.ceil(seconds / 86400) if seconds > 0 else -math.floor(-seconds / 86400)


def deadline_words(req: Any, now: datetime) -> str:
    """The legal deadline in words; a closed case says its outcome against it (a cancelled one
    never "met" it: its deadline stopped running)."""
    if req.status == "cancelled":
        return f"no longer runs: the request was cancelled (it was due {present.absolute(req.due_at)})"
    if req.status == "completed":
        end = req.completed_at
        when = "before" if end is not None and end <= req.due_at else "after"
        return f"completed {when} it (due {present.absolute(req.due_at)})"
    left = days_left(req, now)
    if left > 0:
        return f"{present.count(left, 'day')} left (due {present.absolute(req.due_at)})"
    return f"deadline passed {present.span((now - req.due_at).total_seconds())} ago ({present.absolute(req.due_at)})"


def heartbeat_late(req: Any, now: datetime) -> bool:
    """A worker holds the lease but missed three heartbeats (`silent_since`): stuck, paused or
    killed; the next worker takes over when the lease lapses."""
    return silent_since(req, now) is not None


OVERDUE_GRACE = timedelta(minutes=2)  # the dispatcher looks every minute


def next_check(req: Any, now: datetime) -> datetime | None:
    """When the case is looked at next: while a worker holds it, when its lease would lapse (the
    heartbeat moves it on); otherwise its saved next check or retry time."""
    if req.status in ("completed", "cancelled"):
        return None
    if lease_live(req, now):
        return req.lease_expires_at
    return req.next_check_at or req.next_attempt_at


def overdue(req: Any, now: datetime, unsettled: bool = False) -> bool:
    """An open case whose next check passed more than the dispatcher's cycle ago; never one a worker
    holds now (its heartbeat is the check) nor one queued for a free worker (it shows how long it
    has waited; the overview shows the saturation and health the oldest wait)."""
    due = next_check(req, now)
    if lease_live(req, now) or queued(req, now, unsettled):
        return False
    return due is not None and due < now - OVERDUE_GRACE


def waiting_on_receiver(req: Any, now: datetime, silent: str, unsettled: bool = False) -> str:
    """The open question, said first of a case whose receiver did not answer (`silent`: "<receiver> at
    <url> did not answer since <time>") while the system would run it: nothing runs until it answers,
    so it is not waiting for a free worker."""
    question = open_question(req, now, unsettled)
    if not silent or req.status not in ("approved", "running", "retry_wait") or lease_live(req, now):
        return question
    if question and not queued(req, now, unsettled):
        return f"{silent}; {question}"
    return f"{silent}: nothing runs until it answers, then the next run goes on from the saved stage"


def status_words(req: Any, now: datetime, unsettled: bool = False, applied: int | None = None) -> str:
    """The status as it reads now: "effect unknown", "running, worker not reporting since …",
    "queued for a free worker"; a closed case its outcome ("cancelled: nothing deleted").
    `applied`: how many of its stages' effects were applied (None: not read)."""
    if req.status == "cancelled":
        if applied is None:
            return "cancelled"
        if applied == 0:
            return "cancelled: nothing deleted"
        return f"cancelled after {present.count(applied, 'stage')} applied (their effects stand)"
    if effect_unknown(req, now, unsettled):
        return "effect unknown"
    beat = silent_since(req, now)
    if beat is not None:
        return f"running, worker not reporting since {present.absolute(beat)}"
    if queued(req, now, unsettled):
        return "queued for a free worker"
    return STATUS_WORDS.get(req.status, req.status)


def story(req: Any, now: datetime, unsettled: bool = False, *, silent: str = "", applied: int | None = None) -> Story:
    """The one account of a deletion case every face gives (`core.present.Story`): its status in
    words, its open question, who acts next, its next check and its deadline, from the saved rows.
    `unsettled`: its current stage's effect was submitted and not settled; `silent`: its receiver
    noted as not answering, in words; `applied`: how many stages were applied."""
    held = custodians(req, now, unsettled)
    closed = req.status in ("completed", "cancelled")
    return Story(
        status=req.status,
        status_words=status_words(req, now, unsettled, applied),
        question=waiting_on_receiver(req, now, silent, unsettled),
        owner=held.words() + (" (next check overdue)" if overdue(req, now, unsettled) else ""),
        person=held.person,
        backup=held.backup,
        rota=rota_for(req, now, unsettled),
        why_nobody=held.why,
        next_check_at=next_check(req, now),
        deadline=deadline_words(req, now),
        deadline_at=None if closed else req.due_at,
        closed=closed,
    )


def panel(told: Story, req: Any, *, target: str | None = None) -> CasePanel:
    """The case page's first screen: the story (`story`), with what is changed and the attempt.
    `target`: the target as the reader may see it (masked for support), else the stored one."""
    attempt = f"{present.worker(req.lease_owner)}, lease #{req.lease_generation}" if req.lease_owner else "none"
    communities = present.count(len(community_ids(req.inventory_json)), "community", "communities")
    return CasePanel(
        what=f"Delete the data of user {target or req.target} ({communities})",
        status=req.status,
        status_label=told.status_words,
        open_question=told.question,
        next_check_at=told.next_check_at,
        owner=told.owner,
        last_action=req.last_action or "-",
        attempt=attempt,
        deadline=told.deadline,
        closed=told.closed,
    )


def cannot_run_now(req: Any, now: datetime) -> str:
    """Why a run enqueued now would do nothing, or "" when it would run."""
    if req.cancel_requested_at is not None:
        return f"cancellation was recorded by {req.cancel_requested_by}"
    if req.lease_owner is not None and req.lease_expires_at is not None and req.lease_expires_at > now:
        return f"a {present.worker(req.lease_owner)} holds the lease until {present.absolute(req.lease_expires_at)}"
    if req.status == "retry_wait" and req.next_attempt_at is not None and req.next_attempt_at > now:
        return f"the retry is not due for {present.span(int((req.next_attempt_at - now).total_seconds()) + 1)}"
    return ""


def settle_refusal(req: Any, *, effect_unknown: bool, by_hand: bool) -> str:
    """Why "Confirm not applied" cannot act now ("" when it can), in the panel's own terms: an effect
    handed to a person is recorded, not confirmed; an unknown effect is first looked up by the next
    worker; only a lookup that could not settle it (the case waits to retry) is confirmed by a person."""
    if effect_unknown and req.status == "retry_wait":
        return ""
    if by_hand and req.status == "needs_attention":
        return "this effect is applied by a person in the vendor's console: record what they did instead"
    if effect_unknown:
        return (
            "the effect is unknown and the next worker looks the operation up at the target first: confirm it "
            "was not applied only if that lookup cannot settle it (the case then waits to retry)"
        )
    return "no stage's effect is in question: nothing to confirm"


APPROVE, CANCEL, RUN = (
    "deletions.approve_deletionrequest",
    "deletions.cancel_deletionrequest",
    "deletions.run_deletionrequest",
)


def actions(
    req: Any,
    perms: set[str],
    *,
    now: datetime,
    submitter: bool,
    effect_unknown: bool,
    by_hand: bool = False,
    open_faults: Collection[str] = (),
    applied_after: bool = False,
    recorded: bool = False,
) -> list[Offer]:
    """Every action of a deletion case, each a link when it can act now, otherwise disabled with
    the reason: none is hidden. The services re-check everything on POST; this only keeps the
    page honest. A `manual:` target's case offers Record effect applied by hand where others
    offer Resume (it is how such a case goes on), and Correct a record once one was made
    (`recorded`). `open_faults`: the kinds of its open faults; `applied_after`: an effect was
    applied by hand after withdrawal (`custody.faults_refusal`, as the services refuse)."""
    status, label = req.status, STATUS_WORDS.get(req.status, req.status)
    ended = status in ("completed", "cancelled")
    in_review = status in ("submitted", "needs_review")
    approve_why = (
        ("you submitted this request: an approver (not you) must approve it" if submitter else "")
        if in_review
        else f"the request is {label}: only a request waiting for approval is approved"
    )
    if in_review and not approve_why:
        approve_why = custody.faults_refusal("approved", open_faults=open_faults, applied_after=applied_after)
    settle_why = settle_refusal(req, effect_unknown=effect_unknown, by_hand=by_hand)
    on_hold_why = "" if status == "needs_attention" else "only a request that needs attention is taken up again"
    if not on_hold_why:
        on_hold_why = custody.faults_refusal(
            "recorded" if by_hand else "resumed", open_faults=open_faults, applied_after=applied_after
        )
    close_why = (
        custody.close_refusal(
            sorted(open_faults)[0],
            open_faults=open_faults,
            actor="",
            submitter=req.requested_by if submitter else "",
            recorded_by=(),
        )
        if open_faults
        else custody.NO_FAULT
    )
    running = status in ("approved", "running", "retry_wait")
    run_why = cannot_run_now(req, now) if running else f"the request is {label}: nothing to run"
    approved = status in ("approved", "running", "retry_wait", "needs_attention")
    revoke_why = "" if approved else f"the request is {label}: no current approval to revoke"
    if ended:
        cancel_why = f"the request is already {label}"
    elif req.cancel_requested_at is not None:
        cancel_why = f"cancellation already recorded by {req.cancel_requested_by}"
    else:
        cancel_why = ""
    return [
        offer("approve", "Approve", perm=APPROVE, perms=perms, why_not=approve_why),
        offer("settle", "Confirm not applied", perm=RUN, perms=perms, why_not=settle_why),
        offer(
            "record",
            "Record effect applied by hand",
            perm=RUN,
            perms=perms,
            why_not=on_hold_why or (custody.own_effect(req.requested_by) if submitter else ""),
        )
        if by_hand
        else offer("resume", "Resume", perm=RUN, perms=perms, why_not=on_hold_why),
        offer("run", "Run now", perm=RUN, perms=perms, why_not=run_why),
        offer("revoke", "Revoke approval", perm=APPROVE, perms=perms, why_not=revoke_why),
        offer("cancel", "Cancel", perm=CANCEL, perms=perms, why_not=cancel_why),
        offer("close-alarm", "Close alarm", perm=APPROVE, perms=perms, why_not=close_why),
        *(
            [
                offer(
                    "correct",
                    "Correct a record",
                    perm=APPROVE,
                    perms=perms,
                    why_not="" if recorded else "no effect was recorded by hand on this case: nothing to correct",
                )
            ]
            if by_hand
            else []
        ),
    ]


ASKED = {  # what a case waiting on a person asks of them: the action that answers it
    "submitted": "approve",
    "needs_review": "approve",
    "retry_wait": "settle",
    "needs_attention": "resume",
}


def cannot_act(req: Any, offers: list[Offer], *, by_hand: bool) -> str:
    """Why the reader of `offers` (their own, from `actions`) could not do what the case asks of its
    person, or "": Take is not offered then (`core.custody.offers`)."""
    name = ASKED.get(req.status)
    if req.status == "needs_attention" and by_hand:
        name = "record"
    if req.status == "retry_wait" and not req.open_question:
        name = None  # a plain retry asks nobody
    asked = next((o for o in offers if o.name == name), None)
    if asked is None or asked.enabled:
        return ""
    return f"you could not then {asked.label[:1].lower()}{asked.label[1:]}: {asked.why_not}"


EXTEND = "deletions.extend_deadline_deletionrequest"


def deadline_offer(req: Any, perms: set[str]) -> Offer:
    ended = req.status in ("completed", "cancelled")
    why = f"the request is {STATUS_WORDS[req.status]}: its deadline no longer runs" if ended else ""
    return offer("extend-deadline", "Extend deadline", perm=EXTEND, perms=perms, why_not=why)


STATUS_WORDS = {
    "submitted": "waiting for approval",
    "needs_review": "back in review",
    "approved": "approved",
    "running": "running",
    "retry_wait": "waiting to retry",
    "needs_attention": "needing attention",
    "completed": "completed",
    "cancelled": "cancelled",
}


def progress(stages: list[StageSnapshot], inventory: dict[str, Any]) -> str:
    """ "3 of 5 stages" (a community without agents skips one)."""
    total = stage_count(len(community_ids(inventory))) - len(own_records_ids(inventory))
    skipped = sum(
        1 for s in stages if s.stage == "purge_db" and (s.decision or {}).get("transition") == "community_complete"
    )
    done = sum(1 for s in stages if s.status == "completed")
    return f"{done} of {total - skipped} stages"


def chain_picture(
    inventory: dict[str, Any], stages: list[StageSnapshot], *, request_status: str = "", effect_unknown: bool = False
) -> list[Lane]:
    """Gate, then one lane per inventory community, in workflow order; unreached steps greyed.
    The current stage shows the request's own waiting state: effect unknown (submitted, not
    settled), needs review (refused at the receiving boundary), needs attention."""
    ordered = shown_chain(stages, request_status=request_status, effect_unknown=effect_unknown)
    gate = next((s for s in ordered if s.stage == "gate_user"), None)
    lanes = [Lane("gate", [Box(present.humanize("gate_user"), gate.status if gate else "not_started")])]
    own = own_records_ids(inventory)
    for index, cid in enumerate(community_ids(inventory)):
        rows = [s for s in ordered if s.community_id == cid]
        db = next((s for s in rows if s.stage == "purge_db"), None)
        if cid in own:  # their own records: one effect, never agents
            lanes.append(Lane("their own records", [Box(present.humanize("purge_db"), _status(db), _detail(db))]))
            continue
        lane = Lane(f"community {chr(ord('B') + index) if index < 24 else index} · {cid[-4:]}")
        agents = next((s for s in rows if s.stage == "purge_agents"), None)
        lane.boxes.append(Box(present.humanize("purge_db"), _status(db), _detail(db)))
        skipped = db is not None and (db.decision or {}).get("transition") == "community_complete"
        lane.boxes.append(
            Box(
                present.humanize("purge_agents"),
                "skipped" if skipped else (agents.status if agents else "not_started"),
                _detail(agents),
            )
        )
        lanes.append(lane)
    return lanes


def _status(row: StageSnapshot | None) -> str:
    return row.status if row else "not_started"


def shown_chain(stages: list[StageSnapshot], *, request_status: str, effect_unknown: bool) -> list[StageSnapshot]:
    """The stages in workflow order, the current one showing the request's waiting state."""
    return [_as_shown(s, request_status, effect_unknown) for s in chain_order(stages)]


def _as_shown(row: StageSnapshot, request_status: str, effect_unknown: bool) -> StageSnapshot:
    if not row.is_current or row.status == "completed":
        return row
    if effect_unknown:
        return replace(row, status="effect_unknown")
    if request_status in ("needs_review", "needs_attention"):
        return replace(row, status=request_status)
    return row


def _detail(row: StageSnapshot | None) -> str:
    if row is None:
        return ""
    if row.result and "has_agents" in row.result:
        return "agents found" if row.result["has_agents"] else "no agents"
    return row.last_error or ""


@dataclass(frozen=True)
class Moment:
    """One line of the case's timeline: a staff decision or a worker event."""

    at: datetime
    who: str
    what: str
    why: str
    kind: str  # staff | worker | boundary


EVENT_WORDS = {
    "claim": "claimed the lease",
    "takeover": "took over an expired lease",
    "release": "released the lease",
}


def alarm_said(message: str, question: str) -> str:
    """An open alarm's saved words as a face shows them under the case's open question (`question`,
    as saved): what they repeat of it is said once, as "the open question above"."""
    return message.replace(question, "the open question above") if question else message


def alarm_words(kind: str, *, by_hand: bool) -> str:
    """An alarm's kind as the page says it: at a target a person applies effects in, the effect was
    handed to that person, not lost in a lookup."""
    if by_hand and kind == "effect_unknown":
        return "effect handed to a person"
    return present.humanize(kind)


def timeline(
    decisions: list[Any], events: list[Any], attempts: list[Any] | None = None, *, by_hand: bool = False
) -> list[Moment]:
    """Decisions, lease events and the attempts that failed, in one list, oldest first. A run of
    plain claims and releases (the workers' routine) reads as one line; a takeover, a failure or
    a decision always stands on its own. `by_hand`: a target a person applies effects in (an
    attempt that handed its effect over reads so, not "effect unknown")."""
    out = [
        Moment(
            d.created_at,
            d.actor_label or "system",
            d.action.replace("_", " "),
            d.reason,
            "boundary" if d.action == "boundary_refused" else ("staff" if d.actor_id else "worker"),
        )
        for d in decisions
    ]
    for a in attempts or []:
        if a.outcome in ("failed", "effect_unknown"):
            unknown = "stage handed to a person" if by_hand else "stage effect unknown"
            what = "stage failed" if a.outcome == "failed" else unknown
            stage = present.humanize(getattr(getattr(a, "stage", None), "stage", ""))
            out.append(Moment(a.finished_at or a.started_at, present.worker(a.executor), f"{what}: {stage}",
                              a.error, "failure"))  # fmt: skip
    for e in events:
        why = f"lease #{e.generation}"
        if e.event == "takeover" and e.previous_owner:
            why += f"; {present.worker(e.previous_owner)}'s lease had expired"
        out.append(Moment(e.at, present.worker(e.owner), EVENT_WORDS.get(e.event, e.event), why, "worker"))
    return _grouped(_failures_folded(sorted(out, key=lambda m: (m.at, _AT_ONE_INSTANT.get(m.what.split(":")[0], 0)))))


# What happens at one instant, in the order it happened: a decision, the claim it allows, the
# attempt's failure, the release (a frozen clock, as the demo's, stamps them all alike).
_AT_ONE_INSTANT = {
    EVENT_WORDS["claim"]: 1,
    EVENT_WORDS["takeover"]: 1,
    "stage failed": 2,
    "stage effect unknown": 2,
    "stage handed to a person": 2,
    EVENT_WORDS["release"]: 3,
}


ROUTINE = ("claimed the lease", "released the lease")


def _failures_folded(moments: list[Moment]) -> list[Moment]:
    """The same failure again and again, with only the workers' routine between (a stage failing
    on each retry), said once: "stage failed: purge db, 10 times in a row", the error once, with
    the leases it ran under and when the last was. The routine lines inside the run go with it."""
    out: list[Moment] = []
    i = 0
    while i < len(moments):
        first, end = moments[i], i + 1
        if first.kind == "failure":
            for k in range(i + 1, len(moments)):
                m = moments[k]
                if m.kind == "failure" and (m.what, m.why) == (first.what, first.why):
                    end = k + 1
                elif not (m.kind == "worker" and m.what in ROUTINE):
                    break
        run = moments[i:end]
        failed = [m for m in run if m.kind == "failure"]
        if len(failed) < 2:
            out.append(first)
            i += 1
            continue
        leases = [m.why for m in run if m.kind == "worker"]
        span = f"leases {leases[0][6:]} to {leases[-1][6:]}, " if len(leases) > 1 else ""
        out.append(Moment(first.at, first.who, f"{first.what}, {len(failed)} times in a row",
                          f"{first.why} ({span}the last {present.absolute(failed[-1].at)})", "failure"))  # fmt: skip
        i = end
    return out


def _grouped(moments: list[Moment]) -> list[Moment]:
    """Consecutive routine lease lines folded into one: "claimed and released the lease 6 times"."""
    out: list[Moment] = []
    run: list[Moment] = []

    def flush() -> None:
        if len(run) > 2:
            claims = sum(1 for m in run if m.what == ROUTINE[0])
            releases = len(run) - claims
            what = (
                f"claimed and released the lease {claims} times"
                if claims == releases
                else f"claimed the lease {claims} times and released it {releases} times"
            )
            first, last = run[0].why, run[-1].why
            out.append(Moment(run[0].at, "workers", what,
                              f"{first} to {last}, until {present.absolute(run[-1].at)}", "routine"))  # fmt: skip
        else:
            out.extend(run)
        run.clear()

    for m in moments:
        if m.kind == "worker" and m.what in ROUTINE:
            run.append(m)
            continue
        flush()
        out.append(m)
    flush()
    return out


def with_revocations(approvals: list[Any], revokes: list[Any]) -> list[tuple[Any, Any]]:
    """Each approval with the decision that revoked it (who and why), or None: the revoker's reason
    stays on the case after a new approval."""
    by_approval = {d.approval_id: d for d in revokes}
    return [(a, by_approval.get(a.id)) for a in approvals]


def attempts_by_stage(rows: list[Any]) -> dict[Any, list[Any]]:
    """Attempt rows keyed by their stage id, in order."""
    out: dict[Any, list[Any]] = {}
    for row in rows:
        out.setdefault(row.stage_id, []).append(row)
    return out


def reapplied_words(answers: list[dict[str, Any] | None]) -> str:
    """A case's effects applied again after its receiver's database was restored, in one line ("" when
    none): how many, and how many were handed to a person or wait for an answer. Pure."""
    if not answers:
        return ""
    outcomes = [(a or {}).get("outcome") for a in answers]
    applied = outcomes.count("applied") + outcomes.count("nothing_there")
    handed, waiting = outcomes.count("handed"), outcomes.count(None)
    said = f"{present.count(applied, 'effect')} re-applied after the application's database was restored"
    if handed:
        said += f"; {present.count(handed, 'effect')} handed to a person (the original approval no longer allows it)"
    if waiting:
        said += f"; {present.count(waiting, 'effect')} sent again, waiting for the receiver's answer"
    return said
