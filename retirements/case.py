"""The retirement case as a support lead reads it: panel and timeline picture. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from core.admin import CasePanel

WIDTH, LEFT, RIGHT = 800, 90, 710


def open_question(req: Any, stalled: str | None) -> str:
    if stalled:
        return f"watcher stalled: {stalled}; resume the watcher"
    if req.status == "held":
        return f"on hold: {req.hold_reason}; release or cancel"
    if req.blocker:
        return f"blocked: {req.blocker}"
    return ""


def panel(req: Any, stalled: str | None) -> CasePanel:
    watcher = req.watcher
    return CasePanel(
        what=f"Retire workspace {req.workspace.slug} ({req.workspace.name}); now {req.workspace.lifecycle}",
        status=req.status,
        status_label=req.get_status_display(),
        open_question=open_question(req, stalled),
        next_check_at=req.next_wake_at,
        owner=req.owner.get_username() if req.owner else "-",
        last_action=req.last_action or "-",
        attempt=f"watcher {str(watcher.id)[:8]} ({watcher.status})" if watcher else "no watcher",
    )


def actions(req: Any, perms: set[str], *, failed_notices: bool = False) -> dict[str, bool]:
    """Which action buttons to offer; the services re-check everything on POST.

    Retry notices is offered only where a notice failed all its attempts: its one way forward.
    """
    open_ = req.status in ("waiting", "held")
    return {
        "retry_notices": failed_notices
        and req.status in ("waiting", "held", "executing")
        and "retirements.retry_notices_retirementrequest" in perms,
        "hold": req.status == "waiting" and "retirements.hold_retirementrequest" in perms,
        "release": req.status == "held" and "retirements.hold_retirementrequest" in perms,
        "cancel": open_ and "retirements.cancel_retirementrequest" in perms,
        "resume": open_ and "retirements.resume_retirementrequest" in perms,
    }


@dataclass(frozen=True)
class Mark:
    x: int
    label: str
    kind: str  # notice | eligible | ponr | purged | requested | now
    status: str = ""
    row: int = 0


@dataclass(frozen=True)
class Span:
    x1: int
    x2: int
    label: str

    @property
    def width(self) -> int:
        return max(self.x2 - self.x1, 2)


@dataclass(frozen=True)
class Timeline:
    start: datetime
    end: datetime
    marks: list[Mark]
    holds: list[Span]


def timeline(req: Any, notices: list[Any], decisions: list[Any], now: datetime) -> Timeline:
    start = req.requested_at
    last = max([req.eligible_at, now, *(d.created_at for d in decisions)])
    end = last + max((last - start) / 20, timedelta(minutes=1))

    def x(t: datetime) -> int:
        span = (end - start).total_seconds() or 1
        return int(LEFT + (RIGHT - LEFT) * min(max((t - start).total_seconds() / span, 0), 1))

    marks = [Mark(x(start), "requested", "requested")]
    for i, n in enumerate(notices):
        marks.append(Mark(x(n.delivered_at or n.due_at), n.kind.replace("_", " "), "notice", n.status, row=i % 2))
    marks.append(Mark(x(req.eligible_at), "eligible", "eligible"))
    for d in decisions:
        if d.action == "point_of_no_return":
            marks.append(Mark(x(d.created_at), "point of no return", "ponr"))
        elif d.action == "purged":
            marks.append(Mark(x(d.created_at), "deleted", "purged"))
        elif d.action in ("cancel", "boundary_close"):
            marks.append(Mark(x(d.created_at), "cancelled" if d.action == "cancel" else "closed", "ponr"))
    if req.status not in ("completed", "cancelled", "closed"):
        marks.append(Mark(x(now), "now", "now"))
    holds: list[Span] = []
    opened: datetime | None = None
    for d in decisions:
        if d.action in ("hold", "boundary_hold"):
            opened = d.created_at
        elif d.action == "release" and opened is not None:
            holds.append(Span(x(opened), x(d.created_at), "hold"))
            opened = None
    if opened is not None:
        holds.append(Span(x(opened), x(now), "on hold"))
    return Timeline(start, end, marks, holds)
