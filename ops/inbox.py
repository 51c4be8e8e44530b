"""Waiting for me: the cases whose person or backup is the user, or that wait on a rota the
user is on and nobody is named yet, across both workflows, soonest due first. Bounded: at most
`LIMIT` of each workflow, read in one query each."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from core import access, clock
from core.admin import lens
from deletions import case as deletion_case
from deletions import selectors as deletion_selectors
from deletions import services as deletion_services
from ops import notify
from ops.models import Delivery
from retirements import case as retirement_case
from retirements import selectors as retirement_selectors
from retirements.models import RequestStatus

LIMIT = 100


@dataclass(frozen=True)
class Row:
    kind: str
    what: str
    url: str
    status: str
    role: str  # person | backup | rota
    question: str
    due_at: datetime | None  # when it must be looked at: its next check, or its deadline if sooner
    deadline: str


def role(user: Any, person: str | None, backup: str | None) -> str:
    if person == user.get_username():
        return "you hold it"
    if backup == user.get_username():
        return "you are its backup"
    return "your rota: nobody named yet"


def rows(user: Any, now: datetime, *, lens: access.Lens) -> list[Row]:
    out: list[Row] = []
    deletions = deletion_selectors.waiting_for(user, deletion_services.rotas_of(user))
    for r in deletions.select_related("assignee", "backup").order_by("due_at", "id")[:LIMIT]:
        due = min(d for d in (deletion_case.next_check(r, now), r.due_at) if d is not None)
        held = deletion_case.custodians(r, now)  # the panel's rule: named for the case's state now
        out.append(
            Row(
                kind="deletion",
                what=lens.target(r.target),
                url=reverse("admin:deletions_deletionrequest_change", args=[r.pk]),
                status=r.get_status_display(),
                role=role(user, held.person, held.backup),
                question=lens.data(
                    deletion_case.open_question(r, now) or deletion_case.STATUS_WORDS[r.status], target=r.target
                ),
                due_at=due,
                deadline=deletion_case.deadline_words(r, now),
            )
        )
    # A retirement in its waiting period asks nothing of anyone (its watcher sends the notices):
    # held, executing or stuck, it does.
    retirements = (
        retirement_selectors.waiting_for(user)
        .exclude(status=RequestStatus.WAITING)
        .select_related("workspace", "watcher", "owner", "backup")
    )
    for w in retirements.order_by("next_wake_at", "id")[:LIMIT]:
        out.append(
            Row(
                kind="retirement",
                what=w.workspace.slug,
                url=reverse("admin:retirements_retirementrequest_change", args=[w.pk]),
                status=w.get_status_display(),
                role=role(
                    user, w.owner.get_username() if w.owner else None, w.backup.get_username() if w.backup else None
                ),
                question=retirement_case.open_question(w, None) or "waiting period",
                due_at=w.next_wake_at,
                deadline="-",
            )
        )
    far = datetime.max.replace(tzinfo=now.tzinfo)
    return sorted(out, key=lambda row: (row.due_at or far, row.kind, row.what))


def inbox_view(request: HttpRequest) -> TemplateResponse:
    now = clock.now()
    context = {
        **admin.site.each_context(request),
        "title": "Waiting for me",
        "now": now,
        "rows": rows(request.user, now, lens=lens(request)),
        "rotas": deletion_services.rotas_of(request.user),
        "rota_names": list(deletion_services.ROTA_PERMISSION),
        "limit": LIMIT,
    }
    return TemplateResponse(request, "admin/inbox.html", context)


class DeliveryForm(forms.Form):
    delivery = forms.ChoiceField(choices=Delivery.choices, widget=forms.RadioSelect, label="Tell me")


def preferences_view(request: HttpRequest) -> HttpResponse:
    """How I am told (immediate, a daily digest, or off but for deadlines), and what I was sent."""
    current = notify.delivery_of(request.user)
    form = DeliveryForm(request.POST or None, initial={"delivery": current})
    if request.method == "POST" and form.is_valid():
        notify.set_delivery(request.user, form.cleaned_data["delivery"])
        messages.success(request, "Saved: " + Delivery(form.cleaned_data["delivery"]).label + ".")
        return HttpResponseRedirect(reverse("notification-preferences"))
    context = {
        **admin.site.each_context(request),
        "title": "My notifications",
        "form": form,
        "sent": notify.recent_for(request.user, 50),
    }
    return TemplateResponse(request, "admin/notification_preferences.html", context)
