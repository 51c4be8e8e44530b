"""Telling people when they must act, in both workflows: approval waiting or expiring soon, needs
attention, effect unknown (an alarm), next check passed by its grace, deadline approaching or
passed. A notification is one more face of its case: it is told to those the case's story waits
on (`Story.waits_on`, as Waiting for me lists it) and says the story's words
(`deletions.reading.story_of`, `retirements.selectors.story`), the person masked, never its own.
Each occurrence becomes one row per person (`ops_notifications`, unique per person and
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
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import connection, transaction
from django.db.models import Count, OuterRef, Subquery
from django.urls import reverse

from core import access, clock, present
from core import custody as rota_rules
from core.backoff import delay
from core.crashpoints import crash_point
from core.errors import BadInput, shown
from core.present import Story
from core.sql import Statements
from deletions import case as deletion_case
from deletions import reading as deletion_reading
from deletions import selectors as deletion_selectors
from deletions import services as deletion_services
from deletions import targets as deletion_targets
from deletions.contract import APPROVERS, OPERATORS_ON_CALL
from deletions.models import DeletionAlarm, DeletionApproval, DeletionRequest, Status
from deletions.store.alarms import EFFECT_UNKNOWN
from ops.models import Delivery, Notification, NotificationPreference
from retirements import selectors as retirement_selectors
from retirements import services as retirement_services
from retirements.contract import ROTA as RETIREMENT_ROTA
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
    """Something people must act on, once (`key` tells this occurrence from a later one): told to
    those the case's story waits on, in its words, with what happened beyond it."""

    event: str
    case_kind: str
    case_id: uuid.UUID
    key: str
    about: str  # the case, as a message names it (ids and a masked target, no personal data)
    told: Story  # the case's story now, as every face tells it (the person masked in it)
    detail: str  # what happened that the story does not say (an alarm as raised, an approval's expiry), or ""
    path: str
    to: tuple[tuple[int, str], ...]  # each person told, and why them (the inbox's words, or the occurrence's)


MAIL = access.Lens(frozenset())  # a mail leaves the back-office: whoever reads it, the person is masked


def _as_mailed(told: Story, target: str) -> Story:
    """The story's words as a mail says them: through the lens of a reader who sees targets masked."""

    def seen(text: str) -> str:
        return str(MAIL.data(text, target=target))

    return replace(
        told,
        status_words=seen(told.status_words),
        question=seen(told.question),
        owner=seen(told.owner),
        why_nobody=seen(told.why_nobody),
        deadline=seen(told.deadline),
    )


def _also(told: Story, event: str, on_call: str) -> tuple[str, str] | None:
    """The rota an occurrence reaches beyond those the story waits on, and why: an approval about to
    expire, the approvers (the case comes back to them); a deadline passed, the whole rota; anything
    told of a case no person acts on now (the system runs it, or it ended), the operators on call
    (`on_call`: their rota in the case's workflow)."""
    if event == "approval_expiring":
        return APPROVERS, "the approvers: the case comes back to them once this approval expires"
    if event == "deadline_passed" and told.rota is not None:
        return told.rota, "its deadline passed: the whole rota is told"
    if told.person is None and told.rota is None:
        return on_call, "no person acts on it now: the operators on call are told"
    return None


def _told_to(
    told: Story,
    event: str,
    named: list[Any],
    members: Callable[[str], list[Any]],
    may: Callable[[Any], bool],
    on_call: str,
) -> tuple[tuple[int, str], ...]:
    """Who is told of an occurrence, and why: those the case's story waits on (`Story.waits_on`,
    the inbox's rule: its person and backup, or its rota while nobody is named), then the rota
    `_also` names; never one who may not hold the case (`may`). `named`: the case's person and
    backup as saved; `members`: a rota's people."""
    out: dict[int, str] = {}
    on_rota = members(told.rota) if told.rota is not None and told.person is None else []
    for user in [*named, *on_rota]:
        how = told.waits_on(user.get_username(), [told.rota] if told.rota is not None and user in on_rota else [])
        if how and may(user):
            out.setdefault(user.pk, deletion_reading.WAITS[how])
    also = _also(told, event, on_call)
    if also is not None:
        for user in members(also[0]):
            if may(user):
                out.setdefault(user.pk, also[1])
    return tuple(out.items())


class _Rotas:
    """Each rota's people, read once a tick."""

    def __init__(self, permission: dict[str, str]) -> None:
        self.permission, self.people = permission, dict[str, list[Any]]()

    def __call__(self, rota: str) -> list[Any]:
        if rota not in self.people:
            self.people[rota] = rota_rules.rota(rota, self.permission[rota])
        return self.people[rota]


def _about(req: DeletionRequest) -> str:
    return f"deletion {str(req.id)[:8]} ({access.mask(req.target)})"


def deletion_occurrences(now: datetime) -> list[Occurrence]:
    """Each deletion case's occurrences: found first, then the cases read once (with what their
    story needs) and each told in its story's words, to whom it waits on."""
    found: list[tuple[uuid.UUID, str, str, str]] = []  # (case, event, key, detail)
    waiting = DeletionRequest.objects.filter(status__in=[Status.SUBMITTED, Status.NEEDS_REVIEW])
    for case_id, rounds in (
        waiting.annotate(rounds=Count("approvals")).order_by("created_at").values_list("id", "rounds")[:LIMIT]
    ):
        found.append((case_id, "approval_waiting", f"approval_waiting:{case_id}:{rounds}", ""))
    latest = DeletionApproval.objects.filter(request=OuterRef("request")).order_by("-approved_at").values("pk")[:1]
    soon = DeletionApproval.objects.filter(
        revoked_at__isnull=True,
        expires_at__gt=now,
        expires_at__lte=now + APPROVAL_WARNING,
        request__status__in=[Status.APPROVED, Status.RUNNING, Status.RETRY_WAIT, Status.NEEDS_ATTENTION],
    ).filter(pk=Subquery(latest))
    for a in soon.order_by("expires_at")[:LIMIT]:
        expiry = (
            f"The approval by {a.approved_by} expires {present.absolute(a.expires_at)}; the case then goes back "
            "to review and needs a new approval before any further stage."
        )
        found.append((a.request_id, "approval_expiring", f"approval_expiring:{a.pk}", expiry))
    attention = DeletionRequest.objects.filter(status=Status.NEEDS_ATTENTION).order_by("updated_at")
    for case_id, next_check_at, updated_at in attention.values_list("id", "next_check_at", "updated_at")[:LIMIT]:
        mark = (next_check_at or updated_at).isoformat()
        found.append((case_id, "needs_attention", f"needs_attention:{case_id}:{mark}", ""))
    alarms = list(DeletionAlarm.objects.filter(resolved_at__isnull=True).order_by("created_at")[:LIMIT])
    for held in deletion_selectors.in_flight(LIMIT) + deletion_selectors.needing_attention(LIMIT):
        if deletion_case.overdue(held, now, bool(getattr(held, "unsettled", False))):
            due = deletion_case.next_check(held, now)
            found.append(
                (held.id, "next_check_passed", f"next_check_passed:{held.id}:{due.isoformat() if due else ''}", "")
            )
    warning = timedelta(days=settings.DELETION_DEADLINE_WARNING_DAYS)
    open_ = DeletionRequest.objects.exclude(status__in=[Status.COMPLETED, Status.CANCELLED])
    for case_id, due_at in (
        open_.filter(due_at__lte=now + warning).order_by("due_at").values_list("id", "due_at")[:LIMIT]
    ):
        event = "deadline_passed" if due_at <= now else "deadline_approaching"
        found.append((case_id, event, f"{event}:{case_id}:{due_at.isoformat()}", ""))

    # The cases, each read once with what its story needs (`reading.story_of`): no query per case.
    ids = {case_id for case_id, *_ in found} | {a.request_id for a in alarms}
    cases = {r.id: r for r in deletion_selectors.for_stories(ids)}
    silence, stories = deletion_targets.silences(), dict[uuid.UUID, Story]()
    for alarm in alarms:
        if (req := cases.get(alarm.request_id)) is None:
            continue  # removed by retention since it was read
        unknown = alarm.kind == EFFECT_UNKNOWN and deletion_case.effect_unknown(
            req, now, bool(getattr(req, "unsettled", False))
        )
        said = deletion_case.alarm_said(alarm.message, req.open_question)  # as the case page shows it
        raised = f"Alarm raised {present.absolute(alarm.created_at)}: {said}"
        found.append((req.id, "effect_unknown" if unknown else "alarm", f"deletion_alarm:{alarm.pk}", raised))
    rotas = _Rotas(deletion_services.ROTA_PERMISSION)
    out: list[Occurrence] = []
    for case_id, event, key, detail in found:
        if (req := cases.get(case_id)) is None:
            continue
        if case_id not in stories:
            stories[case_id] = deletion_reading.story_of(req, now, silent=silence(req.target))
        told = stories[case_id]
        named = [u for u in (req.assignee, req.backup) if u is not None]
        out.append(
            Occurrence(
                event,
                "deletion",
                req.id,
                key,
                _about(req),
                _as_mailed(told, req.target),
                str(MAIL.data(detail, target=req.target)),
                reverse("admin:deletions_deletionrequest_change", args=[req.pk]),
                _told_to(told, event, named, rotas, partial(deletion_case.may_hold, req), OPERATORS_ON_CALL),
            )
        )
    return out


def retirement_occurrences(now: datetime) -> list[Occurrence]:
    """A retirement's alarms (a stalled watcher, a failed notice, a hold grown old, a refused
    purge), each told in its story's words to whom it waits on (its owner and backup)."""
    alarms = list(Alarm.objects.filter(resolved_at__isnull=True).order_by("created_at")[:LIMIT])
    cases = {
        r.id: r
        for r in RetirementRequest.objects.filter(id__in={a.request_id for a in alarms})
        .select_related("workspace", "owner", "backup", "watcher", "purge_job")
        .annotate(live_claim=retirement_selectors.LIVE_CLAIM)  # what its story reads: no query per case
    }
    rotas = _Rotas({RETIREMENT_ROTA: retirement_services.HOLD})
    stories: dict[uuid.UUID, Story] = {}
    out: list[Occurrence] = []
    for alarm in alarms:
        if (req := cases.get(alarm.request_id)) is None:
            continue  # removed by retention since it was read
        if req.id not in stories:
            stories[req.id] = retirement_selectors.story(req, now)
        told = stories[req.id]
        named = [u for u in (req.owner, req.backup) if u is not None]
        out.append(
            Occurrence(
                "alarm",
                "retirement",
                req.id,
                f"retirement_alarm:{alarm.pk}",
                f"retirement {str(req.id)[:8]} ({req.workspace.slug})",
                told,
                f"Alarm raised {present.absolute(alarm.created_at)}: {alarm.message}",
                reverse("admin:retirements_retirementrequest_change", args=[req.pk]),
                _told_to(told, "alarm", named, rotas, lambda user: True, RETIREMENT_ROTA),
            )
        )
    return out


def mail_body(o: Occurrence, why: str, link: str) -> str:
    """A message: what occurred, then the case's story as every face tells it, why the reader is
    told, what happened beyond the story, and the link to the case."""
    t = o.told
    lines = [f"{SUBJECTS[o.event]}: {o.about}", "", f"Status: {t.status_words}"]
    lines += [f"Open question: {t.question}"] if t.question else []
    lines += [f"Who acts next: {t.owner}", f"Next check: {present.absolute(t.next_check_at)}"]
    lines += [f"Deadline: {t.deadline}"] if t.deadline else []
    lines += [f"You: {why}"]
    lines += ["", o.detail] if o.detail else []
    return "\n".join([*lines, "", f"Open the case: {link}", ""])


def _deliveries(user_ids: set[int]) -> dict[int, str]:
    chosen = dict(NotificationPreference.objects.filter(user_id__in=user_ids).values_list("user_id", "delivery"))
    return {i: chosen.get(i, Delivery.IMMEDIATE) for i in user_ids}


def record(occurrences: list[Occurrence], now: datetime) -> int:
    """One row per person and occurrence (none again for an occurrence already recorded); a digest
    reader's rows wait for their digest, and "off" records only deadlines."""
    deliveries = _deliveries({i for o in occurrences for i, _ in o.to})
    added = 0
    with connection.cursor() as cur:
        for o in occurrences:
            for person, why in o.to:
                delivery = deliveries[person]
                if delivery == Delivery.OFF and o.event not in DEADLINE_EVENTS:
                    continue
                status = "digest" if delivery == Delivery.DIGEST and o.event not in DEADLINE_EVENTS else "pending"
                subject = f"[back-office] {SUBJECTS[o.event]}: {o.about}"
                row = SQL.one(
                    cur,
                    "add",
                    recipient=person,
                    key=o.key[:200],
                    event=o.event,
                    case_kind=o.case_kind,
                    case_id=o.case_id,
                    subject=subject[:200],
                    body=mail_body(o, why, f"{settings.BACKOFFICE_URL}{o.path}"),
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
