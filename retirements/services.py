"""One service per staff decision: request, hold, release, cancel, resume.

Each checks the actor's permission, locks workspace then request, refuses with
the rule's name, writes the decision log and enqueues work on commit.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from core.errors import BadInput, NotFound, Refused
from retirements import clock, policy, tasks
from retirements.models import (
    OPEN_REQUEST_STATUSES,
    Lifecycle,
    NoticeSlot,
    NoticeStatus,
    RequestStatus,
    RetirementRequest,
    RetirementWatcher,
    WatcherStatus,
    Workspace,
)
from retirements.records import (
    lock_request,
    log_decision,
    resolve_alarms,
    settle_watcher,
    slot_views,
    suppress_pending_notices,
)

WATCHER_FRESH = timedelta(minutes=5)
PAST_PONR = "past the point of no return"


def user_named(username: str) -> Any:
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise NotFound(f"no user named {username!r}")
    return user


def require_perm(actor: Any, perm: str) -> None:
    if not (actor.is_active and actor.is_staff and actor.has_perm(f"retirements.{perm}")):
        raise Refused(f"{actor.get_username()} lacks permission retirements.{perm} (active staff only)")


def _reason(reason: str, what: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise BadInput(f"a reason is required to {what}")
    return reason


def _closed_refusal(request: RetirementRequest) -> Refused:
    if request.status in (RequestStatus.EXECUTING, RequestStatus.COMPLETED):
        return Refused(f"{PAST_PONR}: request {request.id} is {request.status}")
    return Refused(f"request {request.id} is already {request.status}")


def retirement_request(*, actor: User, slug: str, reason: str, confirmation: str) -> RetirementRequest:
    require_perm(actor, "request_retirement")
    reason = _reason(reason, "request a retirement")
    now = clock.now()
    try:
        with transaction.atomic():
            workspace = Workspace.objects.select_for_update().filter(slug=slug).first()
            if workspace is None:
                raise NotFound(f"no workspace with slug {slug!r}")
            open_request = RetirementRequest.objects.filter(
                workspace=workspace, status__in=OPEN_REQUEST_STATUSES
            ).first()
            if open_request is not None:
                raise Refused(f"an open request exists for {slug}: {open_request.id} ({open_request.status})")
            if workspace.lifecycle != Lifecycle.DISABLED:
                raise Refused(f"workspace {slug} is {workspace.lifecycle}; only a disabled workspace can be retired")
            if workspace.legal_hold:
                raise Refused(f"workspace {slug} has a legal hold")
            if workspace.protected_reason:
                raise Refused(f"workspace {slug} is protected: {workspace.protected_reason}")
            if confirmation != slug:
                raise Refused(f"confirmation does not match slug: typed {confirmation!r}, expected {slug!r}")
            elig = policy.eligibility(
                never_activated=workspace.activated_at is None,
                disposable=workspace.is_disposable_test,
                production=settings.PRODUCTION,
                disposable_wait=timedelta(seconds=settings.RETIREMENT_DISPOSABLE_WAIT_SECONDS),
                now=now,
            )
            request = RetirementRequest.objects.create(
                workspace=workspace,
                requested_by=actor,
                reason=reason,
                confirmation=confirmation,
                requested_at=now,
                eligible_at=elig.eligible_at,
                eligibility_policy=elig.policy,
                next_wake_at=now,
                owner=actor,
                last_action=f"requested by {actor.get_username()}",
                updated_at=now,
            )
            NoticeSlot.objects.bulk_create(
                NoticeSlot(request=request, kind=p.kind, due_at=p.due_at, gating=p.gating)
                for p in policy.notice_plan(now, elig.eligible_at)
            )
            watcher = RetirementWatcher.objects.create(request=request, created_at=now)
            request.watcher = watcher
            request.save(update_fields=["watcher"])
            workspace.mark_deletion_pending()
            workspace.save(update_fields=["lifecycle"])
            log_decision(request=request, workspace=workspace, actor=actor, action="request", reason=reason, now=now)
            transaction.on_commit(lambda: tasks.enqueue_watcher_step(watcher.id))
            return request
    except IntegrityError:
        raise Refused(f"an open request exists for {slug}") from None


def retirement_hold(*, actor: User, request_id: UUID | str, reason: str) -> RetirementRequest:
    require_perm(actor, "hold_retirementrequest")
    reason = _reason(reason, "hold a retirement")
    now = clock.now()
    with transaction.atomic():
        request, workspace = lock_request(request_id)
        if request.status == RequestStatus.HELD:
            raise Refused(
                f"already held by {request.held_by or 'the watcher'} since {request.held_at}: {request.hold_reason}"
            )
        if request.status != RequestStatus.WAITING:
            raise _closed_refusal(request)
        request.hold()
        request.held_at, request.held_by, request.hold_reason = now, actor, reason
        request.next_wake_at = None
        request.owner = actor
        request.last_action = f"held by {actor.get_username()}: {reason}"
        request.updated_at = now
        request.save(
            update_fields=[
                "status",
                "held_at",
                "held_by",
                "hold_reason",
                "next_wake_at",
                "owner",
                "last_action",
                "updated_at",
            ]
        )
        log_decision(request=request, workspace=workspace, actor=actor, action="hold", reason=reason, now=now)
        return request


def retirement_release(*, actor: User, request_id: UUID | str, reason: str = "") -> RetirementRequest:
    """Eligibility moves by the time on hold; pending notices are re-planned."""
    require_perm(actor, "hold_retirementrequest")
    now = clock.now()
    with transaction.atomic():
        request, workspace = lock_request(request_id)
        if request.status == RequestStatus.WAITING:
            raise Refused(f"not held: request {request.id} is waiting")
        if request.status != RequestStatus.HELD:
            raise _closed_refusal(request)
        held_for = now - (request.held_at or now)
        plan = policy.replan_on_release(
            requested_at=request.requested_at,
            eligible_at=request.eligible_at,
            held_for=held_for,
            slots=slot_views(request),
        )
        for slot_id, due in plan.moved:
            NoticeSlot.objects.filter(id=slot_id).update(due_at=due, next_attempt_at=None)
        NoticeSlot.objects.filter(id__in=plan.suppressed).update(status=NoticeStatus.SUPPRESSED)
        NoticeSlot.objects.bulk_create(
            NoticeSlot(request=request, kind=p.kind, due_at=p.due_at, gating=p.gating) for p in plan.added
        )
        request.release()
        request.eligible_at = plan.eligible_at
        request.held_at, request.held_by = None, None
        request.blocker, request.blocked_until = "", None
        request.next_wake_at = policy.next_wake(
            eligible_at=plan.eligible_at,
            pending=slot_views(request, pending_only=True),
            blocked_until=None,
        )
        request.last_action = f"released by {actor.get_username()} after {held_for}; eligible at {plan.eligible_at}"
        request.updated_at = now
        request.save(
            update_fields=[
                "status",
                "eligible_at",
                "held_at",
                "held_by",
                "blocker",
                "blocked_until",
                "next_wake_at",
                "last_action",
                "updated_at",
            ]
        )
        log_decision(
            request=request,
            workspace=workspace,
            actor=actor,
            action="release",
            reason=reason or f"held for {held_for}; eligibility extended to {plan.eligible_at.isoformat()}",
            now=now,
        )
        watcher_id = request.watcher_id
        if watcher_id:
            transaction.on_commit(lambda: tasks.enqueue_watcher_step(watcher_id))
        return request


def retirement_cancel(*, actor: User, request_id: UUID | str, reason: str) -> RetirementRequest:
    require_perm(actor, "cancel_retirementrequest")
    reason = _reason(reason, "cancel a retirement")
    now = clock.now()
    with transaction.atomic():
        request, workspace = lock_request(request_id)
        if request.status not in (RequestStatus.WAITING, RequestStatus.HELD):
            raise _closed_refusal(request)
        request.cancel()
        request.cancelled_at, request.cancelled_by, request.cancel_reason = now, actor, reason
        request.next_wake_at = None
        request.concluded_at = now
        request.conclusion = f"cancelled by {actor.get_username()}: {reason}"
        request.last_action = request.conclusion
        request.updated_at = now
        request.save(
            update_fields=[
                "status",
                "cancelled_at",
                "cancelled_by",
                "cancel_reason",
                "next_wake_at",
                "concluded_at",
                "conclusion",
                "last_action",
                "updated_at",
            ]
        )
        if workspace.lifecycle == Lifecycle.DELETION_PENDING:
            workspace.restore_disabled()
            workspace.save(update_fields=["lifecycle"])
        suppress_pending_notices(request)
        for watcher in RetirementWatcher.objects.select_for_update().filter(
            request=request, status__in=[WatcherStatus.PENDING, WatcherStatus.RUNNING]
        ):
            settle_watcher(watcher, reason="request cancelled", now=now)
        log_decision(request=request, workspace=workspace, actor=actor, action="cancel", reason=reason, now=now)
        return request


def retirement_resume(*, actor: User, request_id: UUID | str) -> RetirementRequest:
    """Replace the watcher. Never releases a hold, shortens eligibility or satisfies a notice."""
    require_perm(actor, "resume_retirementrequest")
    now = clock.now()
    with transaction.atomic():
        request, workspace = lock_request(request_id)
        if request.status not in (RequestStatus.WAITING, RequestStatus.HELD):
            raise _closed_refusal(request)
        old = (
            RetirementWatcher.objects.select_for_update().filter(id=request.watcher_id).first()
            if request.watcher_id
            else None
        )
        if (
            old is not None
            and old.status in (WatcherStatus.PENDING, WatcherStatus.RUNNING)
            and old.heartbeat_at is not None
            and now - old.heartbeat_at < WATCHER_FRESH
        ):
            raise Refused(f"watcher still running: {old.id} heartbeat at {old.heartbeat_at.isoformat()}")
        new = RetirementWatcher.objects.create(request=request, created_at=now, replaces=old)
        if old is not None and old.status in (WatcherStatus.PENDING, WatcherStatus.RUNNING):
            settle_watcher(
                old, reason=f"superseded by {new.id} (resumed by {actor.get_username()})", now=now, superseded=True
            )
        request.watcher = new
        if request.status == RequestStatus.WAITING:
            request.next_wake_at = now
        request.last_action = f"watcher resumed by {actor.get_username()}"
        request.updated_at = now
        request.save(update_fields=["watcher", "next_wake_at", "last_action", "updated_at"])
        resolve_alarms(kind="watcher_stalled", request=request, now=now)
        log_decision(
            request=request,
            workspace=workspace,
            actor=actor,
            action="resume",
            reason=f"watcher {new.id} replaces {old.id if old else 'none'}",
            now=now,
        )
        transaction.on_commit(lambda: tasks.enqueue_watcher_step(new.id))
        return request
