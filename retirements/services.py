"""One service per staff decision: request, hold, release, cancel, resume, retry notices, close an alarm.

Each takes the acting `Actor`, checks its permission itself, locks workspace
then request (through the store), refuses with the rule's name, has the store
write and log the decision, and enqueues work on commit.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, transaction

from core import authority, clock, present
from core import custody as rota_rules
from core.authority import Actor
from core.errors import BadInput, Refused, plain_text, shown
from core.errors import required_reason as _reason
from retirements import jobs, policy, selectors
from retirements.contract import ANSWERED_BY_A_MOVE, CLOSED_BY_A_PERSON, ROTA
from retirements.models import Alarm, Lifecycle, PurgeJob, PurgeStatus, RequestStatus, RetirementRequest, Workspace
from retirements.store import decisions as store_decisions
from retirements.store import locks
from retirements.store import notices as store_notices
from retirements.store import purge as store_purge
from retirements.store import requests as store_requests

PAST_PONR = "past the point of no return"
REQUEST = "retirements.request_retirement"
HOLD = "retirements.hold_retirementrequest"
CANCEL = "retirements.cancel_retirementrequest"
RESUME = "retirements.resume_retirementrequest"
RETRY_NOTICES = "retirements.retry_notices_retirementrequest"
PROTECT = "retirements.protect_workspace"
ASSIGN = "retirements.assign_retirementrequest"
VIEW = "retirements.view_retirementrequest"


def _closed_refusal(request: RetirementRequest) -> Refused:
    if request.status in (RequestStatus.EXECUTING, RequestStatus.COMPLETED):
        return Refused(f"{PAST_PONR}: request {request.id} is {request.status}")
    return Refused(f"request {request.id} is already {request.status}")


MAX_SLUG_CHARS, MAX_NAME_CHARS = 100, 200  # the columns' lengths
SLUG_PATTERN = "^[a-z0-9]+(?:[-_][a-z0-9]+)*$"  # lowercase letters and digits, single - or _ between


def valid_slug(slug: str) -> str:
    """A workspace slug as typed: lowercase letters, digits and hyphens, at most 100."""
    if not slug or len(slug) > MAX_SLUG_CHARS or not re.fullmatch(SLUG_PATTERN, slug):
        raise BadInput(f"slug {shown(slug)} is not a slug (1-{MAX_SLUG_CHARS} lowercase letters, digits, hyphens)")
    return slug


def workspace_name(name: str) -> str:
    """A workspace name: 1-200 printable characters (no control characters or escape sequences)."""
    return plain_text(name, "workspace name", max_chars=MAX_NAME_CHARS)


def retirement_request(*, actor: Actor, slug: str, reason: str, confirmation: str) -> RetirementRequest:
    authority.require(actor, REQUEST)
    slug = valid_slug(slug)
    reason = _reason(reason, "request a retirement")
    now = clock.now()
    try:
        with transaction.atomic():
            workspace = locks.lock_workspace(slug)
            open_request = selectors.open_request(workspace)
            if open_request is not None:
                raise Refused(f"an open request exists for {slug}: {open_request.id} ({open_request.status})")
            if workspace.lifecycle != Lifecycle.DISABLED:
                raise Refused(f"workspace {slug} is {workspace.lifecycle}; only a disabled workspace can be retired")
            if workspace.legal_hold:
                raise Refused(f"workspace {slug} has a legal hold")
            if workspace.protected_reason:
                raise Refused(f"workspace {slug} is protected: {workspace.protected_reason}")
            if confirmation != slug:
                raise Refused(f"confirmation does not match slug: typed {shown(confirmation)}, expected {slug!r}")
            elig = policy.eligibility(
                never_activated=workspace.activated_at is None,
                disposable=workspace.is_disposable_test,
                production=settings.PRODUCTION,
                disposable_wait=timedelta(seconds=settings.RETIREMENT_DISPOSABLE_WAIT_SECONDS),
                now=now,
            )
            users = rota_rules.rota(ROTA, HOLD)
            owner = _first_owner(actor, users)
            request, watcher = store_requests.create_request(
                workspace=workspace,
                actor=actor,
                reason=reason,
                confirmation=confirmation,
                eligibility=elig,
                plan=policy.notice_plan(now, elig.eligible_at),
                now=now,
                owner=owner,
            )
            _name_backup(request, now, users)
            transaction.on_commit(lambda: jobs.enqueue_watcher_step(watcher.id))
            return request
    except IntegrityError:
        raise Refused(f"an open request exists for {slug}") from None


def retirement_hold(*, actor: Actor, request_id: UUID | str, reason: str) -> RetirementRequest:
    authority.require(actor, HOLD)
    reason = _reason(reason, "hold a retirement")
    now = clock.now()
    with transaction.atomic():
        request, workspace = locks.for_decision(request_id)
        if request.status == RequestStatus.HELD:
            raise Refused(
                f"already held by {request.held_by or 'the watcher'} since {present.absolute(request.held_at)}: "
                f"{request.hold_reason}"
            )
        if request.status != RequestStatus.WAITING:
            raise _closed_refusal(request)
        if store_requests.cover(request, owner=actor.user.pk) is None:
            raise Refused(
                f"nobody else may back up {actor.name} on a held retirement (a case waiting on people has a person "
                "and a backup); nothing was recorded"
            )
        store_requests.hold(request, workspace, actor=actor, reason=reason, now=now, action="hold")
        request.refresh_from_db()
        return request


def retirement_release(*, actor: Actor, request_id: UUID | str, reason: str) -> RetirementRequest:
    """Eligibility moves by the time on hold; pending notices are re-planned."""
    authority.require(actor, HOLD)
    reason = _reason(reason, "release a hold")
    now = clock.now()
    with transaction.atomic():
        request, workspace = locks.for_decision(request_id)
        if request.status == RequestStatus.WAITING:
            raise Refused(f"not held: request {request.id} is waiting")
        if request.status != RequestStatus.HELD:
            raise _closed_refusal(request)
        plan = policy.replan_on_release(
            requested_at=request.requested_at,
            eligible_at=request.eligible_at,
            held_for=now - (request.held_at or now),
            slots=selectors.slot_views(request),
            now=now,
        )
        store_requests.release(request, workspace, actor=actor, plan=plan, reason=reason, now=now)
        watcher_id = request.watcher_id
        if watcher_id:
            transaction.on_commit(lambda: jobs.enqueue_watcher_step(watcher_id))
        return request


def retirement_cancel(*, actor: Actor, request_id: UUID | str, reason: str) -> RetirementRequest:
    authority.require(actor, CANCEL)
    reason = _reason(reason, "cancel a retirement")
    now = clock.now()
    with transaction.atomic():
        request, workspace = locks.for_decision(request_id)
        if request.status not in (RequestStatus.WAITING, RequestStatus.HELD):
            raise _closed_refusal(request)
        store_requests.cancel(request, workspace, actor=actor, reason=reason, now=now)
        request.refresh_from_db()
        return request


def retirement_resume(*, actor: Actor, request_id: UUID | str, reason: str) -> RetirementRequest:
    """Replace the watcher. Never releases a hold, shortens eligibility or satisfies a notice."""
    authority.require(actor, RESUME)
    reason = _reason(reason, "resume a watcher")
    now = clock.now()
    with transaction.atomic():
        # Concurrent resumes wait for each other (briefly: `for_decision`) and the later ones meet
        # the new watcher, so one wins.
        request, workspace = locks.for_decision(request_id)
        if request.status not in (RequestStatus.WAITING, RequestStatus.HELD):
            raise _closed_refusal(request)
        old = locks.lock_current_watcher(request)
        why_not = policy.resume_refusal(
            request_status=request.status,
            watcher_status=old.status if old else None,
            stalled=selectors.stall_reason(request, now),
            next_wake_at=request.next_wake_at,
            alive_until=selectors.alive_until(request),
            now=now,
        )
        if why_not:
            raise Refused(why_not)
        new = store_requests.replace_watcher(request, workspace, actor=actor, old=old, reason=reason, now=now)
        transaction.on_commit(lambda: jobs.enqueue_watcher_step(new.id))
        return request


def retirement_retry_notices(*, actor: Actor, request_id: UUID | str, reason: str) -> RetirementRequest:
    """Failed notices get a fresh attempt budget; a failed gating notice no longer blocks for good."""
    authority.require(actor, RETRY_NOTICES)
    reason = _reason(reason, "retry failed notices")
    now = clock.now()
    with transaction.atomic():
        request, workspace = locks.for_decision(request_id)
        if request.status not in (RequestStatus.WAITING, RequestStatus.HELD, RequestStatus.EXECUTING):
            raise _closed_refusal(request)
        if not request.notices.filter(status="failed").exists():
            raise Refused(f"request {request.id} has no failed notice to retry")
        store_notices.rearm_failed_notices(request, workspace, actor=actor, reason=reason, now=now)
        watcher_id = request.watcher_id
        if watcher_id and request.status == RequestStatus.WAITING:
            transaction.on_commit(lambda: jobs.enqueue_watcher_step(watcher_id))
        return request


def _refused_purge(request_id: UUID | str) -> tuple[RetirementRequest, Workspace, Any]:
    """The locked request, workspace and purge job of a request whose purge the boundary refused."""
    request, workspace = locks.for_decision(request_id)
    job = PurgeJob.objects.select_for_update().filter(request=request).first()
    if request.status != RequestStatus.EXECUTING or job is None or job.status != PurgeStatus.REFUSED:
        raise Refused(f"request {request.id} has no refused purge (it is {request.status})")
    return request, workspace, job


def retirement_retry_purge(*, actor: Actor, request_id: UUID | str, reason: str) -> RetirementRequest:
    """A refused purge runs again, once the requester holds request_retirement again; the
    receiving boundary rechecks everything when it runs."""
    authority.require(actor, RESUME)
    reason = _reason(reason, "retry a refused purge")
    now = clock.now()
    with transaction.atomic():
        request, workspace, job = _refused_purge(request_id)
        requester = type(request.requested_by).objects.get(pk=request.requested_by_id)
        if not authority.may(requester, REQUEST):
            raise Refused(
                f"requester {requester.get_username()} is still not active staff holding request_retirement: "
                "restore that first, or close the request without purge"
            )
        store_purge.retry_refused(request, workspace, job, actor=actor, reason=reason, now=now)
        transaction.on_commit(lambda: jobs.enqueue_purge(job.id))
        request.refresh_from_db()
        return request


def retirement_close_refused(*, actor: Actor, request_id: UUID | str, reason: str) -> RetirementRequest:
    """A staff decision ends a request whose purge was refused: nothing was purged, so it closes
    without purge and the workspace returns to disabled."""
    authority.require(actor, CANCEL)
    reason = _reason(reason, "close a request whose purge was refused")
    now = clock.now()
    with transaction.atomic():
        request, workspace, job = _refused_purge(request_id)
        store_purge.close_refused(request, workspace, job, actor=actor, reason=reason, now=now)
        request.refresh_from_db()
        return request


def retirement_close_alarm(*, actor: Actor, request_id: UUID | str, reason: str, kind: str = "") -> Alarm:
    """A named person closes an alarm no state move answers (`contract.CLOSED_BY_A_PERSON`: a late
    purge executor rejected at the boundary) with what they found: a decision on the case, which
    the alarm row names. An alarm a move answers is refused, naming that move. `kind`: which, ""
    for the one open. The alarm as closed."""
    authority.require(actor, RESUME)
    reason = _reason(reason, "close an alarm")
    kind = kind.strip()
    if kind and kind not in CLOSED_BY_A_PERSON and kind not in ANSWERED_BY_A_MOVE:
        raise BadInput(
            f"{shown(kind)} is not a retirement alarm's kind: a person closes {' or '.join(CLOSED_BY_A_PERSON)}"
        )
    now = clock.now()
    with transaction.atomic():
        request, workspace = locks.for_decision(request_id)
        kind, why = policy.alarm_to_close(kind, selectors.open_alarm_kinds(request))
        if why:
            raise Refused(f"request {request.id}: {why}; nothing was recorded")
        closed = store_decisions.close_alarm(
            request=request, workspace=workspace, kind=kind, actor=actor, reason=reason, now=now
        )
        return selectors.alarm(closed)


def workspace_create(
    *, slug: str, name: str, disabled: bool, never_activated: bool, disposable: bool, legal_hold: bool
) -> Workspace:
    """A new workspace (demo data and scripts): the same limits as the admin's."""
    slug, name, now = valid_slug(slug), workspace_name(name), clock.now()
    if disposable and settings.PRODUCTION:
        raise Refused("disposable test workspaces are refused in production: no retirement could ever purge one here")
    try:
        with transaction.atomic():
            return store_requests.create_workspace(
                slug=slug,
                name=name,
                lifecycle=Lifecycle.DISABLED if disabled else Lifecycle.ACTIVE,
                activated_at=None if never_activated else now,
                disposable=disposable,
                legal_hold=legal_hold,
                now=now,
            )
    except IntegrityError:
        raise Refused(f"a workspace with slug {shown(slug)} exists") from None


def workspace_protect(
    *, actor: Actor, slug: str, legal_hold: bool | None, protected_reason: str | None, reason: str
) -> list[str]:
    """Set or lift a workspace's legal hold and protection: the destructive boundary's own
    protections (a retirement closes without purge while either stands). None keeps what the
    locked row has. Refused once the workspace is being deleted, and when nothing would change."""
    authority.require(actor, PROTECT)
    reason = _reason(reason, "change a workspace's protections")
    if protected_reason is not None:
        protected_reason = (
            plain_text(protected_reason, "protection reason", max_chars=MAX_NAME_CHARS)
            if protected_reason.strip()
            else ""
        )
    now = clock.now()
    with transaction.atomic():
        workspace = locks.lock_workspace(valid_slug(slug))
        if workspace.lifecycle in (Lifecycle.DELETING, Lifecycle.DELETED):
            raise Refused(f"{PAST_PONR}: workspace {workspace.slug} is {workspace.lifecycle}")
        legal_hold = workspace.legal_hold if legal_hold is None else legal_hold
        protected_reason = workspace.protected_reason if protected_reason is None else protected_reason
        if (legal_hold, protected_reason) == (workspace.legal_hold, workspace.protected_reason):
            raise Refused(f"workspace {workspace.slug} already has these protections; nothing changed")
        request = selectors.open_request(workspace)
        if request is not None:
            request = RetirementRequest.objects.select_for_update().get(id=request.id)  # after the workspace
        return store_requests.set_protection(
            workspace,
            request,
            legal_hold=legal_hold,
            protected_reason=protected_reason,
            actor=actor,
            reason=reason,
            now=now,
        )


# Custody: the owner (the requester, or whoever took the case) and a backup from the rota.


def _first_owner(actor: Actor, users: list[Any]) -> int:
    """Who holds a new retirement: its requester when they may hold retirements, else the rota's
    least loaded (a service account of an intake system holds no case)."""
    if authority.may(actor.user, HOLD):
        return int(actor.user.pk)
    person = rota_rules.pick(rota_rules.members_of(users, selectors.open_load([u.pk for u in users]))).person
    if person is None:
        raise Refused(f"nobody on the {ROTA} rota may hold a retirement now; nothing was requested")
    return person


def _name_backup(request: RetirementRequest, now: datetime, users: list[Any]) -> bool:
    """The rota names a backup beside the owner (and an owner when there is none)."""
    load = selectors.open_load([u.pk for u in users])
    members = rota_rules.members_of(users, load)
    pick = rota_rules.pick(members) if request.owner_id is None else rota_rules.pick(members, keep=request.owner_id)
    if (pick.person, pick.backup) == (request.owner_id, request.backup_id):
        return False
    return store_requests.assign(request, owner=pick.person, backup=pick.backup, now=now)


def retirement_name_by_rota(*, limit: int = 500) -> int:
    """Name a backup (and an owner where none is) for every open case that lacks one."""
    now = clock.now()
    users = rota_rules.rota(ROTA, HOLD)
    named = 0
    for request in selectors.custody_candidates(limit):
        with transaction.atomic():
            named += _name_backup(request, now, users)
    return named


def retirement_custody(
    *, actor: Actor, request_id: UUID | str, how: str, reason: str, person: str = ""
) -> RetirementRequest:
    """Take, assign or hand over a retirement case (`core.custody.by_hand`): a decision with a reason."""
    if how not in rota_rules.HOW:
        raise BadInput(f"{shown(how)} is not a custody move: take, assign or hand over")
    reason = _reason(reason, f"{how} a case")
    now = clock.now()
    with transaction.atomic():
        request, workspace = locks.for_decision(request_id)
        if request.status not in (RequestStatus.WAITING, RequestStatus.HELD, RequestStatus.EXECUTING):
            raise Refused(f"request {request.id} is {request.status}: an ended case is held by nobody")
        users = rota_rules.rota(ROTA, HOLD)
        try:
            new, pick = rota_rules.by_hand(
                how,
                rota_name=ROTA,
                actor=actor.user,
                users=users,
                load=selectors.open_load([u.pk for u in users]),
                person_id=request.owner_id,
                backup_id=request.backup_id,
                named=person,
                may_assign=authority.may(actor.user, ASSIGN),
            )
        except Refused as refused:
            raise Refused(f"request {request.id}: {refused.message}; nothing was recorded") from None
        if pick.backup is None and request.status == RequestStatus.HELD:
            raise Refused(
                f"request {request.id}: nobody else on the {ROTA} rota may back up {new.get_username()} while it is "
                "held; nothing was recorded"
            )
        store_requests.assign(request, owner=pick.person, backup=pick.backup, now=now)
        names = {u.pk: u.get_username() for u in users}
        store_decisions.log_decision(
            request=request,
            workspace=workspace,
            actor=actor,
            action=how.replace(" ", "_"),
            reason=f"{new.get_username()} holds it (backup: {names.get(pick.backup, 'none on the rota')}): {reason}",
            now=now,
        )
        request.refresh_from_db()
        return request
