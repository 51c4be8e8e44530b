"""Deletions that survive a restore: when a receiver's database went back in time (restored from a
backup taken before some deletions), every completed effect it no longer knows is applied again.

A receiver reports what its database has applied (an incarnation and the number of its last operation
newly applied, signed: `GET .../health`, and in each effect's evidence); the back-office keeps the
highest it holds evidence of (noted where evidence is saved: `stages.sql` `save_result`). When the
receiver reports less (`targets.http.went_back`), `reapply_restored` looks up, case by case in
completion order and stage by stage in order, each completed effect the receiver may have lost (its
evidence numbers it past what the receiver reports, or names another incarnation); one it no longer
knows is applied again as a new operation (a new id, a generation past the receiver's fence, the data
versions of a fresh preview), under the original approval's authority (`authority.reapply_refusal`: not
revoked, its approver and requester still active staff holding their permissions), or handed to a person
(an alarm) where that rule refuses. Each is a row (`models.DeletionReapplication`), written before it is
sent and answered once with the receiver's signed evidence, which the proof carries next to the first
("re-applied after the application's database was restored"). Once every lost effect is answered, what
the receiver reports becomes what the back-office holds (`store.receivers.rebased`), and health turns
green.

Run by `manage.py reapply_restored` and by the dispatcher's tick (`reapply_all`), never twice for one
first operation (the table's unique key).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from core import grants
from core.logs import event
from deletions import authority, targets
from deletions.contract import AuthorityFacts, Lease, StageSnapshot
from deletions.errors import Refused
from deletions.models import DeletionReapplication, DeletionRequest, StageStatus, Status
from deletions.rules.workflow import RULES_VERSION
from deletions.selectors import case_stages
from deletions.store import alarms, reapplications, receivers
from deletions.targets.base import Found, NotFound, TargetBusy, TargetRefused, TargetUnreachable, Unreadable
from deletions.targets.http import HttpTarget, Registration, State, health, reported, state_in, went_back

logger = logging.getLogger("deletions")
SAID = "re-applied after the application's database was restored"
EXECUTOR = "reapply-after-restore"
GRANT_LIFETIME = timedelta(minutes=5)
HANDED = "reapply_handed"  # the alarm of an effect the original approval's rules no longer allow again
APPLIED, HANDED_OUTCOME, NOTHING_THERE = "applied", "handed", "nothing_there"


@dataclass
class Pass:
    """What one pass over a receiver did, in counts and words."""

    receiver: str
    why: str = ""  # how its database went back in time ("" when it did not)
    checked: int = 0
    reapplied: list[UUID] = field(default_factory=list)  # first operation ids
    handed: list[UUID] = field(default_factory=list)
    unsettled: list[str] = field(default_factory=list)  # what stays for the next pass, in words
    rebased: bool = False

    def said(self) -> str:
        if not self.why:
            return f"{self.receiver}: its database holds every effect the back-office holds evidence of"
        left = f"; left for the next pass: {'; '.join(self.unsettled)}" if self.unsettled else ""
        return (
            f"{self.why}. {self.checked} completed effect(s) looked up, {len(self.reapplied)} re-applied, "
            f"{len(self.handed)} handed to a person{left}"
        )


def may_be_lost(evidence: dict[str, Any], state: State | None) -> bool:
    """Whether a completed effect's evidence is past what the receiver's database now reports (so it
    may have been lost in the restore): a number past the reported one, another incarnation, or no
    number at all (evidence from before receivers kept one). Pure."""
    said = state_in(evidence)
    if said is None or state is None:
        return True
    return said.incarnation != state.incarnation or said.applied > state.applied


def reapply_all(now: datetime, *, due_only: bool = False) -> list[Pass]:
    """`reapply_restored` for every registered receiver (`manage.py reapply_restored`), or, `due_only`
    (the dispatcher's tick), for those whose health (read at most every 30 s: `http.reported`) says their
    database went back in time or whose re-applications wait for an answer. A receiver that does not
    answer its health is left for the next pass."""
    unanswered = DeletionReapplication.objects.filter(answer__isnull=True)
    waiting = set(unanswered.values_list("request__target", flat=True))
    out = []
    for r in targets.registered():
        if due_only and not went_back(r.state, reported(r)[0], "") and not any(t.startswith(r.prefix) for t in waiting):
            continue
        try:
            out.append(reapply_restored(r, now=now))
        except TargetUnreachable as exc:
            out.append(Pass(r.name, why=exc.message, unsettled=[exc.message]))
    return out


def registration(prefix: str) -> Registration:
    found = next((r for r in targets.registered() if r.prefix == prefix), None)
    if found is None:
        raise Refused(f"no receiver is registered under {prefix!r}")
    return found


def reapply_restored(r: Registration, *, now: datetime) -> Pass:
    """One pass over one receiver: nothing when its database reports at least what the back-office holds
    evidence of and no re-application waits for an answer; else every completed effect it lost applied
    again (or handed to a person), and, once none is left, what it reports is held from then on."""
    state = health(r)
    done = Pass(r.name, why=went_back(r.state, state, r.where()))
    waiting = DeletionReapplication.objects.filter(answer__isnull=True, request__target__startswith=r.prefix)
    if not done.why and not waiting.exists():
        return done
    done.why = done.why or f"{r.where()}: re-applications wait for an answer"
    adapter = HttpTarget(r)
    cases = DeletionRequest.objects.filter(status=Status.COMPLETED, target__startswith=r.prefix)
    for req in cases.order_by("completed_at", "id"):
        for stage in case_stages(req.id):
            if stage.status != StageStatus.COMPLETED or not isinstance(stage.result, dict):
                continue
            try:
                _settle(adapter, req, stage, state, done, now=now)
            except TargetUnreachable as exc:
                done.unsettled.append(exc.message)
    if not done.unsettled:
        now_reported = health(r)
        held = r.state or State("", 0)
        if now_reported is not None:
            done.rebased = receivers.rebased(
                prefix=r.prefix,
                held=(held.incarnation, held.applied),
                now_reported=(now_reported.incarnation, now_reported.applied),
            )
    event(logger, "reapplied_after_restore", logging.WARNING, reason=done.said()[:300])
    return done


def _settle(
    adapter: HttpTarget,
    req: DeletionRequest,
    stage: StageSnapshot,
    state: State | None,
    done: Pass,
    *,
    now: datetime,
) -> None:
    """One completed effect: known at the receiver (nothing to do), or applied again, or handed to a person;
    what cannot be said now is left for the next pass."""
    row = DeletionReapplication.objects.filter(first_operation_id=stage.operation_id).first()
    if row is not None and row.answer is not None:
        return
    if row is None:
        if not may_be_lost(stage.result, state):
            return
        done.checked += 1
        known = adapter.lookup(stage.operation_id)
        if isinstance(known, Found):
            return
        if isinstance(known, Unreadable) or not isinstance(known, NotFound):
            done.unsettled.append(f"operation {stage.operation_id}: {getattr(known, 'reason', 'unreadable')}")
            return
    else:  # sent before and not answered: whether it landed is the receiver's to say, under the new operation
        known = adapter.lookup(row.operation_id)
        if isinstance(known, Found):
            reapplications.answer(row, {"outcome": APPLIED, "at": now.isoformat(), "evidence": known.evidence})
            done.reapplied.append(stage.operation_id)
            return
        if not isinstance(known, NotFound):
            done.unsettled.append(f"operation {row.operation_id}: {getattr(known, 'reason', 'unreadable')}")
            return
    facts = reapplications.authority(req.id, now=now, rules_version=RULES_VERSION)
    refused = authority.reapply_refusal(facts)
    fence = adapter.fence(req.id)
    row = row or reapplications.begin(
        request_id=req.id,
        stage_id=stage.id,
        first=stage.operation_id,
        operation_id=uuid4(),
        generation=max(fence, req.lease_generation or 0) + 1,
        because=done.why,
        now=now,
    )
    if refused is not None:
        _hand(row, req, stage, f"the original approval no longer allows it: {refused.rule}", done, now=now)
        return
    _send(adapter, row, req, stage, facts, fence, done, now=now)


def _send(
    adapter: HttpTarget,
    row: DeletionReapplication,
    req: DeletionRequest,
    stage: StageSnapshot,
    facts: AuthorityFacts,
    fence: int,
    done: Pass,
    *,
    now: datetime,
) -> None:
    """The effect again, as a new operation: its grant built by the rule every stage's is
    (`authority.grant`), with the data versions a fresh preview reads now, good for a few minutes."""
    ids = [str(c["id"]) for c in req.inventory_json.get("communities", [])]
    fresh = adapter.preview(req.target, ids)
    if stage.community_id is not None and stage.community_id not in fresh:
        said = "a fresh preview finds nothing of the person there now; nothing to apply again"
        reapplications.answer(row, {"outcome": NOTHING_THERE, "at": now.isoformat(), "said": said})
        return
    versions = {cid: int(c["version"]) for cid, c in fresh.items() if isinstance(c.get("version"), int)}
    facts = dataclasses.replace(
        facts,
        community_id=stage.community_id,
        approved_version=versions.get(stage.community_id or ""),
        previous_version=None,
        expected_versions=versions if stage.community_id is None else None,
        approval_expires_at=None,
        lease_expires_at=now + GRANT_LIFETIME,
    )
    lease = Lease(req.id, EXECUTOR, max(row.generation, fence + 1), now + GRANT_LIFETIME)
    payload = authority.grant(
        facts, lease=lease, row=dataclasses.replace(stage, operation_id=row.operation_id), target=req.target
    )
    try:
        evidence = adapter.apply(grants.sign(payload))
    except TargetRefused as exc:
        _hand(row, req, stage, f"the receiver refused it ({exc.kind}): {exc.message}", done, now=now)
        return
    except TargetBusy as exc:  # nothing changed there: the next pass sends it again
        done.unsettled.append(f"operation {row.operation_id}: {exc.message}")
        return
    except Exception as exc:  # no answer to believe: the next pass looks the new operation up
        done.unsettled.append(f"operation {row.operation_id}: effect unknown ({type(exc).__name__})")
        return
    reapplications.answer(row, {"outcome": APPLIED, "at": now.isoformat(), "evidence": evidence})
    done.reapplied.append(stage.operation_id)


def _hand(
    row: DeletionReapplication, req: DeletionRequest, stage: StageSnapshot, why: str, done: Pass, *, now: datetime
) -> None:
    """The effect is not applied again here: a person decides (an alarm on the case, the operators on call)."""
    said = f"{stage.stage} {stage.community_id or ''} (operation {stage.operation_id}) not {SAID}: {why}"
    reapplications.answer(row, {"outcome": HANDED_OUTCOME, "at": now.isoformat(), "said": said})
    alarms.raise_alarm(request_id=req.id, kind=HANDED, message=said, now=now, stage_id=stage.id)
    done.handed.append(stage.operation_id)
