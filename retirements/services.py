"""One service per staff decision: request, hold, release, cancel, resume, retry notices.

Each takes the acting `Actor`, checks its permission itself, locks workspace
then request (through the store), refuses with the rule's name, has the store
write and log the decision, and enqueues work on commit.
"""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.text import slugify

from core import authority, clock
from core.authority import Actor
from core.errors import BadInput, Refused, plain_text, shown
from core.errors import required_reason as _reason
from retirements import jobs, policy
from retirements.models import Lifecycle, RequestStatus, RetirementRequest
from retirements.store import locks, reads
from retirements.store import notices as store_notices
from retirements.store import requests as store_requests

PAST_PONR = "past the point of no return"
REQUEST = "retirements.request_retirement"
HOLD = "retirements.hold_retirementrequest"
CANCEL = "retirements.cancel_retirementrequest"
RESUME = "retirements.resume_retirementrequest"
RETRY_NOTICES = "retirements.retry_notices_retirementrequest"


def _closed_refusal(request: RetirementRequest) -> Refused:
    if request.status in (RequestStatus.EXECUTING, RequestStatus.COMPLETED):
        return Refused(f"{PAST_PONR}: request {request.id} is {request.status}")
    return Refused(f"request {request.id} is already {request.status}")


MAX_SLUG_CHARS, MAX_NAME_CHARS = 100, 200  # the columns' lengths


def valid_slug(slug: str) -> str:
    """A workspace slug as typed: lowercase letters, digits and hyphens, at most 100."""
    if not slug or len(slug) > MAX_SLUG_CHARS or slugify(slug) != slug:
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
            open_request = reads.open_request(workspace)
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
            request, watcher = store_requests.create_request(
                workspace=workspace,
                actor=actor,
                reason=reason,
                confirmation=confirmation,
                eligibility=elig,
                plan=policy.notice_plan(now, elig.eligible_at),
                now=now,
            )
            transaction.on_commit(lambda: jobs.enqueue_watcher_step(watcher.id))
            return request
    except IntegrityError:
        raise Refused(f"an open request exists for {slug}") from None


def retirement_hold(*, actor: Actor, request_id: UUID | str, reason: str) -> RetirementRequest:
    authority.require(actor, HOLD)
    reason = _reason(reason, "hold a retirement")
    now = clock.now()
    with transaction.atomic():
        request, workspace = locks.lock_request(request_id)
        if request.status == RequestStatus.HELD:
            raise Refused(
                f"already held by {request.held_by or 'the watcher'} since {request.held_at}: {request.hold_reason}"
            )
        if request.status != RequestStatus.WAITING:
            raise _closed_refusal(request)
        store_requests.hold(request, workspace, actor=actor, reason=reason, now=now, action="hold")
        return request


def retirement_release(*, actor: Actor, request_id: UUID | str, reason: str = "") -> RetirementRequest:
    """Eligibility moves by the time on hold; pending notices are re-planned."""
    authority.require(actor, HOLD)
    now = clock.now()
    with transaction.atomic():
        request, workspace = locks.lock_request(request_id)
        if request.status == RequestStatus.WAITING:
            raise Refused(f"not held: request {request.id} is waiting")
        if request.status != RequestStatus.HELD:
            raise _closed_refusal(request)
        plan = policy.replan_on_release(
            requested_at=request.requested_at,
            eligible_at=request.eligible_at,
            held_for=now - (request.held_at or now),
            slots=reads.slot_views(request),
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
        request, workspace = locks.lock_request(request_id)
        if request.status not in (RequestStatus.WAITING, RequestStatus.HELD):
            raise _closed_refusal(request)
        store_requests.cancel(request, workspace, actor=actor, reason=reason, now=now)
        return request


def retirement_resume(*, actor: Actor, request_id: UUID | str) -> RetirementRequest:
    """Replace the watcher. Never releases a hold, shortens eligibility or satisfies a notice."""
    authority.require(actor, RESUME)
    now = clock.now()
    with transaction.atomic():
        request, workspace = locks.lock_request(request_id)
        if request.status not in (RequestStatus.WAITING, RequestStatus.HELD):
            raise _closed_refusal(request)
        old = locks.lock_current_watcher(request)
        if old is not None and policy.watcher_running(old, now):
            raise Refused(f"watcher still running: {old.id} heartbeat at {old.heartbeat_at}")
        new = store_requests.replace_watcher(request, workspace, actor=actor, old=old, now=now)
        transaction.on_commit(lambda: jobs.enqueue_watcher_step(new.id))
        return request


def retirement_retry_notices(*, actor: Actor, request_id: UUID | str, reason: str) -> RetirementRequest:
    """Failed notices get a fresh attempt budget; a failed gating notice no longer blocks for good."""
    authority.require(actor, RETRY_NOTICES)
    reason = _reason(reason, "retry failed notices")
    now = clock.now()
    with transaction.atomic():
        request, workspace = locks.lock_request(request_id)
        if request.status not in (RequestStatus.WAITING, RequestStatus.HELD, RequestStatus.EXECUTING):
            raise _closed_refusal(request)
        if not request.notices.filter(status="failed").exists():
            raise Refused(f"request {request.id} has no failed notice to retry")
        store_notices.rearm_failed_notices(request, workspace, actor=actor, reason=reason, now=now)
        watcher_id = request.watcher_id
        if watcher_id and request.status == RequestStatus.WAITING:
            transaction.on_commit(lambda: jobs.enqueue_watcher_step(watcher_id))
        return request
