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
from deletions import reading as deletion_reading
from deletions import services as deletion_services
from ops import notify
from ops.models import Delivery
from retirements import selectors as retirement_selectors
from retirements.models import RequestStatus

LIMIT = 100


@dataclass(frozen=True)
class Row:
    kind: str
    what: str
    url: str
    status: str  # the story's status words
    role: str  # how it waits on the user: they hold it, back it up, or it waits on their rota
    question: str
    owner: str  # who acts next, as every face says it
    next_check_at: datetime | None
    deadline: str
    due_at: datetime | None  # when it must be looked at: its next check, or its deadline if sooner


def rows(user: Any, now: datetime, *, lens: access.Lens) -> list[Row]:
    """Each case's words and times are its story's (`case.story`, the page's), never built here."""
    out: list[Row] = []
    for r, told, how in deletion_reading.waiting_for(user, deletion_services.rotas_of(user), now, LIMIT):
        out.append(
            Row(
                kind="deletion",
                what=lens.target(r.target),
                url=reverse("admin:deletions_deletionrequest_change", args=[r.pk]),
                status=told.status_words,
                role=how,
                question=lens.data(told.question or "-", target=r.target),
                owner=lens.data(told.owner, target=r.target),
                next_check_at=told.next_check_at,
                deadline=told.deadline,
                due_at=min((d for d in (told.next_check_at, told.deadline_at) if d is not None), default=None),
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
        told = retirement_selectors.story(w, now)
        out.append(
            Row(
                kind="retirement",
                what=w.workspace.slug,
                url=reverse("admin:retirements_retirementrequest_change", args=[w.pk]),
                status=told.status_words,
                role=deletion_reading.WAITS.get(told.waits_on(user.get_username(), ()), "-"),
                question=told.question or "-",
                owner=told.owner,
                next_check_at=told.next_check_at,
                deadline=told.deadline or "-",
                due_at=min((d for d in (told.next_check_at, told.deadline_at) if d is not None), default=None),
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
