"""Telling people when they must act, in both workflows: approval waiting or expiring soon, needs
attention, effect unknown (an alarm), next check passed by its grace, deadline approaching or
passed. Each occurrence becomes one row per person (`ops_notifications`, unique per person and
occurrence), claimed before it is sent (each claim the next generation), re-checked just before
the send and saved after under the same fence, so each is sent at least once and never twice for
nothing: a sender whose claim was taken over stands down. The one window left is between that
check and the saved outcome: a sender that dies there after sending, or stalls there past its
(renewed) claim, leaves the message to be sent again. A person who prefers a digest gets one a
day, and "off" still brings deadlines.

`tick()` is what `manage.py send_notifications` and the schedule run each minute: the rotas name
people first (so the person is told, not the whole group), then the occurrences are recorded,
the digests made, and whatever is due is sent.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import connection, transaction
from django.urls import reverse

from core import access, clock, present
from core import custody as rota_rules
from core.backoff import delay
from core.crashpoints import crash_point
from core.errors import BadInput, shown
from core.sql import Statements
from deletions import case as deletion_case
from deletions import selectors as deletion_selectors
from deletions import services as deletion_services
from deletions.contract import APPROVERS, OPERATORS_ON_CALL
from deletions.models import DeletionAlarm, DeletionApproval, DeletionRequest, Status
from ops.models import Delivery, Notification, NotificationPreference
from retirements import services as retirement_services
from retirements.models import Alarm, RetirementRequest

SQL = Statements.beside(__file__, "notifications.sql")
logger = logging.getLogger("ops")

LIMIT = 500  # occurrences read per source per tick (the oldest first); the rest come next tick
SEND_LIMIT = 200
MAX_ATTEMPTS = 6
RETRY_FIRST, RETRY_CAP = timedelta(minutes=1), timedelta(hours=1)
APPROVAL_WARNING = timedelta(hours=24)
DEADLINE_EVENTS = ("deadline_approaching", "deadline_passed")
SUBJECTS = {
    "approval_waiting": "Approval waiting",
    "approval_expiring": "Approval expiring soon",
    "needs_attention": "Needs attention",
    "effect_unknown": "Effect unknown",
    "alarm": "Alarm",
    "next_check_passed": "Next check passed",
    "deadline_approaching": "Deadline approaching",
    "deadline_passed": "Deadline passed",
}


@dataclass(frozen=True)
class Occurrence:
    """Something a person must act on, once: `key` tells this occurrence from a later one."""

    event: str
    case_kind: str
    case_id: uuid.UUID
    key: str
    about: str  # the case, as a message names it (ids and a masked target, no personal data)
    detail: str
    path: str
    to: tuple[int, ...]


def _deletion_people(
    req: DeletionRequest, now: datetime, rotas: dict[str, list[Any]], *, group: bool, rota: str | None = None
) -> tuple[int, ...]:
    """The person and backup named for the case; the rota when nobody is (and, with `group`, also)."""
    held = deletion_case.custodians(req, now, bool(getattr(req, "unsettled", False)))
    named = tuple(i for i in (req.assignee_id, req.backup_id) if i is not None) if held.person else ()
    if named and not group:
        return named
    rota = rota or deletion_case.rota_for(req, now, bool(getattr(req, "unsettled", False))) or OPERATORS_ON_CALL
    if rota not in rotas:
        rotas[rota] = rota_rules.rota(rota, deletion_services.ROTA_PERMISSION[rota])
    barred = req.requested_by_user_id if rota == APPROVERS else None
    return tuple(dict.fromkeys([*named, *(u.pk for u in rotas[rota] if u.pk != barred)]))


def _about(req: DeletionRequest) -> str:
    return f"deletion {str(req.id)[:8]} ({access.mask(req.target)})"


def deletion_occurrences(now: datetime) -> list[Occurrence]:
    rotas: dict[str, list[Any]] = {}
    out: list[Occurrence] = []
    base = DeletionRequest.objects.select_related("assignee", "backup")

    def add(req: DeletionRequest, event: str, key: str, detail: str, *, group: bool = False, rota: str = "") -> None:
        path = reverse("admin:deletions_deletionrequest_change", args=[req.pk])
        to = _deletion_people(req, now, rotas, group=group, rota=rota or None)
        # The detail is the case's own words (an open question, an alarm): the person masked in them.
        out.append(
            Occurrence(event, "deletion", req.id, key, _about(req), access.mask_in(detail, req.target), path, to)
        )

    for req in base.filter(status__in=[Status.SUBMITTED, Status.NEEDS_REVIEW]).order_by("created_at")[:LIMIT]:
        n = req.approvals.count()
        add(req, "approval_waiting", f"approval_waiting:{req.id}:{n}", deletion_case.open_question(req, now))
    soon = DeletionApproval.objects.filter(
        revoked_at__isnull=True,
        expires_at__gt=now,
        expires_at__lte=now + APPROVAL_WARNING,
        request__status__in=[Status.APPROVED, Status.RUNNING, Status.RETRY_WAIT, Status.NEEDS_ATTENTION],
    ).select_related("request", "request__assignee", "request__backup")
    for a in soon.order_by("expires_at")[:LIMIT]:
        latest = a.request.approvals.order_by("-approved_at").first()
        if latest is not None and latest.pk == a.pk:
            add(
                a.request,
                "approval_expiring",
                f"approval_expiring:{a.pk}",
                f"the approval by {a.approved_by} expires {present.absolute(a.expires_at)}; the case then goes back "
                "to review and needs a new approval before any further stage",
                rota=APPROVERS,
            )
    for req in base.filter(status=Status.NEEDS_ATTENTION).order_by("updated_at")[:LIMIT]:
        mark = req.next_check_at.isoformat() if req.next_check_at else req.updated_at.isoformat()
        add(req, "needs_attention", f"needs_attention:{req.id}:{mark}", req.open_question or "needs attention")
    alarms = DeletionAlarm.objects.filter(resolved_at__isnull=True).select_related(
        "request", "request__assignee", "request__backup"
    )
    for alarm in alarms.order_by("created_at")[:LIMIT]:
        event = "effect_unknown" if alarm.kind == "effect_unknown" else "alarm"
        add(alarm.request, event, f"deletion_alarm:{alarm.pk}", alarm.message)
    for req in deletion_selectors.in_flight(LIMIT) + deletion_selectors.needing_attention(LIMIT):
        if deletion_case.overdue(req, now, bool(getattr(req, "unsettled", False))):
            due = deletion_case.next_check(req, now)
            add(
                req,
                "next_check_passed",
                f"next_check_passed:{req.id}:{due.isoformat() if due else ''}",
                f"its next check was {present.absolute(due)}",
            )
    warning = timedelta(days=settings.DELETION_DEADLINE_WARNING_DAYS)
    open_ = base.exclude(status__in=[Status.COMPLETED, Status.CANCELLED])
    for req in open_.filter(due_at__lte=now + warning).order_by("due_at")[:LIMIT]:
        passed = req.due_at <= now
        event = "deadline_passed" if passed else "deadline_approaching"
        add(
            req,
            event,
            f"{event}:{req.id}:{req.due_at.isoformat()}",
            deletion_case.deadline_words(req, now),
            group=passed,
        )
    return out


def retirement_occurrences(now: datetime) -> list[Occurrence]:
    """A retirement's alarms (a stalled watcher, a failed notice, a hold grown old, a refused
    purge) and its holds, to its owner and backup."""
    out: list[Occurrence] = []
    alarms = Alarm.objects.filter(resolved_at__isnull=True).select_related("request", "request__workspace")
    for alarm in alarms.order_by("created_at")[:LIMIT]:
        req: RetirementRequest = alarm.request
        to = tuple(i for i in (req.owner_id, req.backup_id) if i is not None)
        path = reverse("admin:retirements_retirementrequest_change", args=[req.pk])
        about = f"retirement {str(req.id)[:8]} ({req.workspace.slug})"
        out.append(
            Occurrence("alarm", "retirement", req.id, f"retirement_alarm:{alarm.pk}", about, alarm.message, path, to)
        )
    return out


def _deliveries(user_ids: set[int]) -> dict[int, str]:
    chosen = dict(NotificationPreference.objects.filter(user_id__in=user_ids).values_list("user_id", "delivery"))
    return {i: chosen.get(i, Delivery.IMMEDIATE) for i in user_ids}


def record(occurrences: list[Occurrence], now: datetime) -> int:
    """One row per person and occurrence (none again for an occurrence already recorded); a digest
    reader's rows wait for their digest, and "off" records only deadlines."""
    deliveries = _deliveries({i for o in occurrences for i in o.to})
    added = 0
    with connection.cursor() as cur:
        for o in occurrences:
            for person in o.to:
                delivery = deliveries[person]
                if delivery == Delivery.OFF and o.event not in DEADLINE_EVENTS:
                    continue
                status = "digest" if delivery == Delivery.DIGEST and o.event not in DEADLINE_EVENTS else "pending"
                subject = f"[back-office] {SUBJECTS[o.event]}: {o.about}"
                link = f"{settings.BACKOFFICE_URL}{o.path}"
                body = f"{SUBJECTS[o.event]}: {o.about}\n\n{o.detail}\n\nOpen the case: {link}\n"
                row = SQL.one(
                    cur,
                    "add",
                    recipient=person,
                    key=o.key[:200],
                    event=o.event,
                    case_kind=o.case_kind,
                    case_id=o.case_id,
                    subject=subject[:200],
                    body=body,
                    status=status,
                    now=now,
                )
                added += row is not None
    return added


def digests(now: datetime) -> int:
    """Once a day per person, one message listing what waited for their digest."""
    if now.hour < settings.NOTIFY_DIGEST_HOUR:
        return 0
    made = 0
    waiting = Notification.objects.filter(status="digest").order_by("recipient_id", "created_at")
    people = sorted(set(waiting.values_list("recipient_id", flat=True)[:LIMIT]))
    with connection.cursor() as cur:
        for person in people:
            with transaction.atomic():
                rows = list(waiting.filter(recipient_id=person)[:100])
                key = f"digest:{person}:{now.date().isoformat()}"
                lines = [f"- {r.subject.removeprefix('[back-office] ')}" for r in rows]
                body = (
                    "Waiting for you since your last digest:\n\n"
                    + "\n".join(lines)
                    + (f"\n\nWaiting for me: {settings.BACKOFFICE_URL}{reverse('inbox')}\n")
                )
                added = SQL.one(
                    cur,
                    "add",
                    recipient=person,
                    key=key,
                    event="digest",
                    case_kind="digest",
                    case_id=uuid.uuid5(uuid.NAMESPACE_URL, key),
                    subject=f"[back-office] Your digest: {len(rows)} case(s)",
                    body=body,
                    status="pending",
                    now=now,
                )
                if added is not None:
                    SQL.run(cur, "digested", recipient=person, ids=[r.pk for r in rows], now=now)
                    made += 1
    return made


def sender_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def send_due(now: datetime, *, by: str | None = None, limit: int = SEND_LIMIT) -> int:
    """Claim what is due and send it; immediately before each send the claim is re-checked
    (holder and generation, `still_held`, which also renews it) and a sender whose claim was taken
    over stands down; each message sent is saved as sent (or failed, to be tried again after a
    backoff) under the same fence, outside any transaction."""
    by = by or sender_id()
    claim = timedelta(seconds=settings.NOTIFY_CLAIM_SECONDS)
    with connection.cursor() as cur:
        cur.execute(SQL.sql("claim_due"), {"by": by, "until": now + claim, "now": now, "limit": limit})
        generations: dict[int, int] = dict(cur.fetchall())
    if generations:
        crash_point("notification-claimed")  # claimed and committed, nothing sent: a pause here can outlive it
    sent = 0
    for n in Notification.objects.filter(id__in=generations).select_related("recipient").order_by("id"):
        generation = generations[n.pk]
        with connection.cursor() as cur:
            held = SQL.one(cur, "still_held", id=n.pk, by=by, generation=generation, until=clock.now() + claim)
        if held is None:
            logger.warning("notification id=%s not sent, stood down: %s", n.pk, _taken_over(n.pk, generation))
            continue
        try:
            if not n.recipient.email:
                raise ValueError(f"{n.recipient.get_username()} has no email address")
            send_mail(n.subject, n.body, settings.DEFAULT_FROM_EMAIL, [n.recipient.email])
        except Exception as exc:
            give_up = n.attempts >= MAX_ATTEMPTS
            with connection.cursor() as cur:
                saved = SQL.one(
                    cur,
                    "failed",
                    id=n.pk,
                    by=by,
                    generation=generation,
                    give_up=give_up,
                    error=str(exc)[:500],
                    retry_at=None if give_up else clock.now() + delay(n.attempts, first=RETRY_FIRST, cap=RETRY_CAP),
                )
            logger.warning("notification id=%s failed attempt=%s", n.pk, n.attempts)
            if saved is None:
                logger.warning("notification id=%s outcome refused: %s", n.pk, _taken_over(n.pk, generation))
            continue
        crash_point("notification-sent")
        with connection.cursor() as cur:
            saved = SQL.one(cur, "sent", id=n.pk, by=by, generation=generation, now=clock.now())
        if saved is None:
            logger.warning("notification id=%s sent; its save refused: %s", n.pk, _taken_over(n.pk, generation))
        sent += saved is not None
    return sent


def _taken_over(notification_id: int, generation: int) -> str:
    """Why a sender no longer holds its claim, in one read (its statement returned no row)."""
    status, now_generation = Notification.objects.values_list("status", "claim_generation").get(id=notification_id)
    return f"its claim (generation {generation}) was taken over: now {status}, generation {now_generation}"


def tick(now: datetime | None = None) -> dict[str, int]:
    """Name people, record what they must be told, make the digests, send what is due."""
    now = now or clock.now()
    named = deletion_services.deletion_name_by_rota() + retirement_services.retirement_name_by_rota()
    recorded = record(deletion_occurrences(now) + retirement_occurrences(now), now)
    made = digests(now)
    sent = send_due(now)
    return {"named": named, "recorded": recorded, "digests": made, "sent": sent}


# Each person's preference, and what they were sent (their "My notifications" page).


def delivery_of(user: Any) -> str:
    return _deliveries({user.pk})[user.pk]


def set_delivery(user: Any, delivery: str) -> None:
    if delivery not in Delivery.values:
        raise BadInput(f"delivery {shown(delivery)} is refused: immediate, digest or off")
    NotificationPreference.objects.update_or_create(user=user, defaults={"delivery": delivery})


def recent_for(user: Any, limit: int) -> list[Notification]:
    return list(Notification.objects.filter(recipient=user).order_by("-created_at", "-id")[:limit])
