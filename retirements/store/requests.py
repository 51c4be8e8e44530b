"""Staff decisions on a request and its watchers: request, hold, release, cancel, resume."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Q, QuerySet

from core import present
from core.authority import Actor
from core.sql import Statements
from retirements.contract import BOUNDARY_HOLD_ALARM, STALLED_ALARM, Eligibility, PlannedNotice, Replan
from retirements.models import RetirementRequest, RetirementWatcher, Workspace
from retirements.store import ACTIVE_WATCHER
from retirements.store.decisions import log_decision, resolve_alarms
from retirements.store.notices import add_slots, replan, suppress_pending

SQL = Statements.beside(__file__, "requests.sql")


def create_request(
    *,
    workspace: Workspace,
    actor: Actor,
    reason: str,
    confirmation: str,
    eligibility: Eligibility,
    plan: Iterable[PlannedNotice],
    now: datetime,
    owner: int,
) -> tuple[RetirementRequest, RetirementWatcher]:
    """Request, notice slots, watcher and workspace deletion_pending, together; held by `owner`
    (the requester when they may hold retirements, else the rota's pick)."""
    request = RetirementRequest.objects.create(
        workspace=workspace,
        requested_by=actor.user,
        reason=reason,
        confirmation=confirmation,
        requested_at=now,
        eligible_at=eligibility.eligible_at,
        eligibility_policy=eligibility.policy,
        next_wake_at=now,
        owner_id=owner,
        last_action=f"requested by {actor.name}",
        updated_at=now,
    )
    add_slots(request, plan)
    watcher = RetirementWatcher.objects.create(request=request, created_at=now)
    request.watcher = watcher
    request.save(update_fields=["watcher"])
    workspace.mark_deletion_pending()
    workspace.save(update_fields=["lifecycle"])
    log_decision(request=request, workspace=workspace, actor=actor, action="request", reason=reason, now=now)
    return request, watcher


def on_call(*, not_user_id: int | None) -> int | None:
    """Who owns a case the system stopped (a boundary hold, a refused purge): the staff person
    RETIREMENT_ON_CALL names, else the first active staff member (by username) allowed to hold
    retirements; never `not_user_id` (the requester who lost authority)."""
    users = User.objects.filter(is_active=True, is_staff=True).exclude(id=not_user_id or 0)
    if settings.RETIREMENT_ON_CALL:
        named = users.filter(username=settings.RETIREMENT_ON_CALL).values_list("id", flat=True).first()
        if named is not None:
            return named
    return _holders().exclude(id=not_user_id or 0).order_by("username").values_list("id", flat=True).first()


HOLD_CODENAME = "hold_retirementrequest"


def _holders() -> QuerySet[User]:
    """Active staff allowed to hold retirements (`HOLD_PERMISSION`, as the database's custody trigger reads it)."""
    allowed = (
        Q(is_superuser=True)
        | Q(groups__permissions__codename=HOLD_CODENAME, groups__permissions__content_type__app_label="retirements")
        | Q(user_permissions__codename=HOLD_CODENAME, user_permissions__content_type__app_label="retirements")
    )
    return User.objects.filter(allowed, is_active=True, is_staff=True).distinct()


def may_hold(user_id: int | None) -> bool:
    return user_id is not None and _holders().filter(id=user_id).exists()


def cover(request: RetirementRequest, *, owner: int | None) -> int | None:
    """The backup beside `owner` once it holds the case: the backup it has, else the owner it had,
    else the first allowed to hold retirements (by username); never `owner`, never one who may not
    hold it (the requester who lost authority). None when nobody else may."""
    candidates = [c for c in (request.backup_id, request.owner_id) if c is not None and c != owner]
    allowed = set(_holders().filter(id__in=candidates).values_list("id", flat=True))
    kept = next((c for c in candidates if c in allowed), None)
    if kept is not None:
        return kept
    return _holders().exclude(id=owner or 0).order_by("username").values_list("id", flat=True).first()


def hold(
    request: RetirementRequest, workspace: Workspace, *, actor: Actor | None, reason: str, now: datetime, action: str
) -> None:
    """Held by a person, or by the watcher at the point of no return (`actor` None)."""
    by = f"held by {actor.name}: {reason}" if actor is not None else f"held at the point of no return: {reason}"
    owner = actor.user.pk if actor is not None else on_call(not_user_id=request.requested_by_id) or request.owner_id
    with connection.cursor() as cur:
        held = SQL.one(
            cur,
            "hold",
            request_id=request.id,
            held_by=actor.user.pk if actor is not None else None,
            owner=owner,
            backup=cover(request, owner=owner),
            reason=reason,
            action=by,
            now=now,
        )
    if held is None:
        raise ValueError(f"request {request.id} is not waiting: it cannot be held")
    log_decision(request=request, workspace=workspace, actor=actor, action=action, reason=reason, now=now)


def release(
    request: RetirementRequest, workspace: Workspace, *, actor: Actor, plan: Replan, reason: str, now: datetime
) -> None:
    held_for = now - (request.held_at or now)
    replan(
        [(slot, due, plan.why_moved) for slot, due in plan.moved]
        + [(slot, None, plan.why_suppressed.get(slot, "suppressed on release")) for slot in plan.suppressed]
    )
    add_slots(request, plan.added)
    resolve_alarms(kind=BOUNDARY_HOLD_ALARM, request=request, now=now)
    request.release()
    request.eligible_at = plan.eligible_at
    request.held_at, request.held_by = None, None
    request.blocker, request.blocked_until = "", None
    request.next_wake_at = plan.next_wake_at
    request.last_action = (
        f"released by {actor.name} after {present.span(held_for.total_seconds())} on hold; "
        f"eligible at {present.absolute(plan.eligible_at)}"
    )
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
        reason=reason
        or f"held for {present.span(held_for.total_seconds())}; eligibility extended to "
        f"{present.absolute(plan.eligible_at)}",
        now=now,
    )


def cancel(request: RetirementRequest, workspace: Workspace, *, actor: Actor, reason: str, now: datetime) -> None:
    """Cancelled by a person: the workspace returns to disabled, pending notices are suppressed,
    watchers settle (`end_without_purge`, the write the boundary's close makes too)."""
    resolve_alarms(kind=BOUNDARY_HOLD_ALARM, request=request, now=now)
    end_without_purge(
        request,
        status="cancelled",
        sources=["waiting", "held"],
        conclusion=f"cancelled by {actor.name}: {reason}",
        settled="request cancelled",
        cancelled_by=actor.user.pk,
        reason=reason,
        now=now,
    )
    log_decision(request=request, workspace=workspace, actor=actor, action="cancel", reason=reason, now=now)


def end_without_purge(
    request: RetirementRequest,
    *,
    status: str,
    sources: list[str],
    conclusion: str,
    settled: str,
    now: datetime,
    cancelled_by: int | None = None,
    reason: str = "",
) -> None:
    """The request ends without purge (cancelled, or closed at the boundary), in one statement; its
    pending notices are then suppressed, with the conclusion as why."""
    with connection.cursor() as cur:
        ended = SQL.one(
            cur,
            "end_without_purge",
            request_id=request.id,
            status=status,
            sources=sources,
            conclusion=conclusion,
            settled=settled,
            cancelled_by=cancelled_by,
            reason=reason,
            now=now,
        )
    if ended is None:
        raise ValueError(f"request {request.id} is {request.status}: it cannot end as {status}")
    suppress_pending(request.id, why=f"suppressed: {conclusion}")


def replace_watcher(
    request: RetirementRequest,
    workspace: Workspace,
    *,
    actor: Actor,
    old: RetirementWatcher | None,
    reason: str,
    now: datetime,
) -> RetirementWatcher:
    new = RetirementWatcher.objects.create(request=request, created_at=now, replaces=old)
    if old is not None and old.status in ACTIVE_WATCHER:
        settle_watcher(old, reason=f"superseded by {new.id} (resumed by {actor.name})", now=now, superseded=True)
    request.watcher = new
    if request.status == "waiting":
        request.next_wake_at = now
    request.last_action = f"watcher resumed by {actor.name}"
    request.updated_at = now
    request.save(update_fields=["watcher", "next_wake_at", "last_action", "updated_at"])
    resolve_alarms(kind=STALLED_ALARM, request=request, now=now)
    log_decision(
        request=request,
        workspace=workspace,
        actor=actor,
        action="resume",
        reason=f"{reason} (watcher {new.id} replaces {old.id if old else 'none'})",
        now=now,
    )
    return new


def settle_watcher(watcher: RetirementWatcher, *, reason: str, now: datetime, superseded: bool = False) -> None:
    """An active watcher concludes, or is superseded; one that already concluded is left as it is."""
    status = "superseded" if superseded else "settled"
    with connection.cursor() as cur:
        SQL.one(cur, "settle_watcher", watcher_id=watcher.id, status=status, reason=reason, now=now)


def create_workspace(
    *,
    slug: str,
    name: str,
    lifecycle: str,
    activated_at: datetime | None,
    disposable: bool,
    legal_hold: bool,
    now: datetime,
) -> Workspace:
    """A new workspace; one created under a legal hold says so in its decision log."""
    workspace = Workspace.objects.create(
        slug=slug,
        name=name,
        lifecycle=lifecycle,
        activated_at=activated_at,
        is_disposable_test=disposable,
        legal_hold=legal_hold,
        created_at=now,
    )
    if legal_hold:
        log_decision(
            request=None,
            workspace=workspace,
            actor=None,
            action="legal_hold_set",
            reason="created under a legal hold",
            now=now,
            system="create_workspace",
        )
    return workspace


def set_protection(
    workspace: Workspace,
    request: RetirementRequest | None,
    *,
    legal_hold: bool,
    protected_reason: str,
    actor: Actor,
    reason: str,
    now: datetime,
) -> list[str]:
    """The locked workspace's protections as decided, each change a decision row (with the open
    request, if there is one). Returns what changed."""
    changes = []
    if legal_hold != workspace.legal_hold:
        changes.append("legal_hold_set" if legal_hold else "legal_hold_lifted")
    if protected_reason != workspace.protected_reason:
        changes.append("protection_set" if protected_reason else "protection_lifted")
    workspace.legal_hold, workspace.protected_reason = legal_hold, protected_reason
    workspace.save(update_fields=["legal_hold", "protected_reason"])
    for action in changes:
        detail = f" ({protected_reason})" if action == "protection_set" else ""
        log_decision(
            request=request, workspace=workspace, actor=actor, action=action, reason=f"{reason}{detail}", now=now
        )
    if request is not None:
        request.last_action = f"{', '.join(c.replace('_', ' ') for c in changes)} by {actor.name}"
        request.updated_at = now
        request.save(update_fields=["last_action", "updated_at"])
    return changes


def assign(request: RetirementRequest, *, owner: int | None, backup: int | None, now: datetime) -> bool:
    """Name the owner and backup; False when the case ended or was named again since it was read."""
    with connection.cursor() as cur:
        row = SQL.one(
            cur,
            "assign",
            request_id=request.id,
            owner=owner,
            backup=backup,
            was_owner=request.owner_id,
            was_backup=request.backup_id,
            now=now,
        )
    return row is not None
