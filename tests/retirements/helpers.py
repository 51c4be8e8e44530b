from __future__ import annotations

from datetime import datetime
from typing import Any

import time_machine
from django.core import mail

from core import clock
from core.authority import Actor
from retirements.models import RetirementRequest
from retirements.services import retirement_request
from retirements.watcher import run_due


def request_at(at: datetime, actor: Any, slug: str = "acme-old") -> RetirementRequest:
    with time_machine.travel(at, tick=False):
        return retirement_request(actor=Actor.of(actor), slug=slug, reason="contract ended", confirmation=slug)


def run_at(at: datetime) -> dict[str, Any]:
    with time_machine.travel(at, tick=False):
        return run_due(now=clock.now())


def subjects() -> list[str]:
    return [str(m.subject) for m in mail.outbox]


def fresh(request: RetirementRequest) -> RetirementRequest:
    return RetirementRequest.objects.select_related("workspace").get(id=request.id)


def notice_states(request: RetirementRequest) -> dict[str, str]:
    return dict(request.notices.values_list("kind", "status"))
