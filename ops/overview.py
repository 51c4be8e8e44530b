"""The operations overview: counts by state and everything that waits on a person.

Each list is one query (bounded), and the counts by state are the tallies the database keeps
where the changes happen (`ops.metrics.read_tallies`, the same counts `/metrics` gives), so the
page costs the same with 10 or 1,000,000 rows.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse

from core import clock
from core.admin import sees
from core.present import Story
from deletions import case as deletion_case
from deletions import reading as deletion_reading
from deletions import selectors as deletion_selectors
from deletions import targets as deletion_targets
from deletions.models import Status
from ops import saturation
from ops.health import report
from ops.metrics import read_tallies
from retirements import selectors as retirement_selectors
from retirements.models import RequestStatus

LIMIT = 20  # rows of each list: the page links to the case lists that hold them all


def overview(now: datetime) -> dict[str, Any]:
    tallies, _ = read_tallies()

    def by_state(metric: str, value: str) -> str:
        return f"{tallies.get(metric, {}).get(value, (0, 0.0))[0]:,}"

    full = saturation.read(now)
    health = report(now, full)
    return {
        "now": now,
        "limit": LIMIT,
        "failing_checks": [(name, check) for name, check in health["checks"].items() if not check["ok"]],
        "checks_count": len(health["checks"]),
        "remedies": health["remedies"],  # what fixes each failing check
        "work": health["work"],
        "saturation": full,
        "deletion_counts": [(s.label, by_state("deletion_requests", s.value), s.value) for s in Status],
        "retirement_counts": [(s.label, by_state("retirement_requests", s.value), s.value) for s in RequestStatus],
        "needs_attention": told(deletion_selectors.needing_attention(LIMIT), now),
        "awaiting_approval": told(deletion_selectors.awaiting_approval(LIMIT), now),
        "effect_unknown": effect_unknown(now),
        "held": [(r, retirement_selectors.story(r, now)) for r in retirement_selectors.held(LIMIT)],
        "stalled": retirement_selectors.detect_stalls(now=now, limit=LIMIT),
        "failed_notices": retirement_selectors.failed_notices(LIMIT),
        "alarms": retirement_selectors.open_alarms(LIMIT),
        "deletion_alarms": deletion_selectors.open_alarms(LIMIT),
        "deadlines": {
            **(
                d := deletion_selectors.deadlines(
                    now, now + timedelta(days=settings.DELETION_DEADLINE_WARNING_DAYS), 10
                )
            ),
            "first": told(d["first"], now),
            "passed": health["work"]["deadlines_passed"]["count"],
            "days": settings.DELETION_DEADLINE_WARNING_DAYS,
        },
    }


def told(rows: Any, now: datetime) -> list[tuple[Any, Story]]:
    """Each deletion case with its story (`case.story`: the words and times of its page)."""
    silence = deletion_targets.silences()
    return [(r, deletion_reading.story_of(r, now, silent=silence(r.target))) for r in rows]


def operations_view(request: HttpRequest) -> TemplateResponse:
    context = {
        **admin.site.each_context(request),
        "title": "Operations overview",
        "sees": sees(request),
        **overview(clock.now()),
    }
    return TemplateResponse(request, "admin/operations.html", context)


def effect_unknown(now: datetime) -> list[tuple[Any, Story]]:
    """Stages whose effect is unknown by the case's one rule (`case.effect_unknown`), each with its
    case's story: a worker that reports on time while it waits for the target's answer is running,
    not listed. The candidates are bounded; in-flight submissions last milliseconds, so they rarely
    take a place."""
    stages = deletion_selectors.unsettled_stages(LIMIT * 4)
    silence = deletion_targets.silences()
    return [
        (s, deletion_reading.story_of(s.request, now, unsettled=True, silent=silence(s.request.target)))
        for s in stages
        if deletion_case.effect_unknown(s.request, now, True)
    ][:LIMIT]
