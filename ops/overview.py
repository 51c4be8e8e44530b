"""The operations overview: counts by state and everything that waits on a person.

Each list is one query (bounded), and the counts stop at 10,000 each ("10,000+"), so the
page costs the same with 10 or 100,000 rows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import admin
from django.db.models import Q
from django.http import HttpRequest
from django.template.response import TemplateResponse

from core import clock
from core.store import capped_counts, shown_count
from deletions import case as deletion_case
from deletions.models import DeletionAlarm, DeletionRequest, StageHistory, Status
from retirements.models import Alarm, NoticeSlot, NoticeStatus, RequestStatus, RetirementRequest
from retirements.watcher import detect_stalls

LIMIT = 50


def overview(now: datetime) -> dict[str, Any]:
    deletion_counts = capped_counts(
        DeletionRequest, "status", [s.value for s in Status], index_order=("-created_at", "-id")
    )
    retirement_counts = capped_counts(
        RetirementRequest, "status", [s.value for s in RequestStatus], index_order=("-requested_at", "-id")
    )
    # Submitted but not settled, or a worker lost mid-stage: nobody may resend until the
    # target system's record (or an operator) says what happened.
    lapsed = Q(request__lease_owner__isnull=True) | Q(request__lease_expires_at__lte=now)
    effect_unknown = (
        StageHistory.objects.filter(is_current=True)
        .filter((Q(submitted_at__isnull=False) & ~Q(status="completed")) | (Q(status="running") & lapsed))
        .select_related("request")[:LIMIT]
    )
    return {
        "now": now,
        "deletion_counts": [(s.label, shown_count(deletion_counts[s.value]), s.value) for s in Status],
        "retirement_counts": [(s.label, shown_count(retirement_counts[s.value]), s.value) for s in RequestStatus],
        "needs_attention": with_responsible(DeletionRequest.objects.filter(status=Status.NEEDS_ATTENTION)[:LIMIT], now),
        "awaiting_approval": with_responsible(
            DeletionRequest.objects.filter(status__in=[Status.SUBMITTED, Status.NEEDS_REVIEW]).order_by("created_at")[
                :LIMIT
            ],
            now,
        ),
        "effect_unknown": list(effect_unknown),
        "held": list(
            RetirementRequest.objects.filter(status=RequestStatus.HELD).select_related("workspace", "owner")[:LIMIT]
        ),
        "stalled": detect_stalls(now=now, limit=LIMIT),
        "failed_notices": list(
            NoticeSlot.objects.filter(status=NoticeStatus.FAILED).select_related("request__workspace")[:LIMIT]
        ),
        "alarms": list(Alarm.objects.filter(resolved_at__isnull=True).select_related("request__workspace")[:LIMIT]),
        "deletion_alarms": list(
            DeletionAlarm.objects.filter(resolved_at__isnull=True).select_related("request")[:LIMIT]
        ),
    }


def with_responsible(rows: Any, now: datetime) -> list[tuple[Any, str]]:
    """Each deletion case with who must act next (the same rule as its case page)."""
    return [(r, deletion_case.responsible(r, now)) for r in rows]


def operations_view(request: HttpRequest) -> TemplateResponse:
    context = {**admin.site.each_context(request), "title": "Operations overview", **overview(clock.now())}
    return TemplateResponse(request, "admin/operations.html", context)
