"""The retirement case as a support lead reads it: panel and timeline picture. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from core import custody as rota_rules
from core import present
from core.present import CasePanel, Offer, Story, offer
from retirements import policy


def open_question(req: Any, stalled: str | None, purge_refused: str = "") -> str:
    if purge_refused:
        return f"the purge was refused ({purge_refused}); nothing was purged: retry it once authority is back, or close"
    if stalled:
        return f"watcher stalled: {stalled}; resume the watcher"
    if req.status == "held":
        return f"on hold: {req.hold_reason}; release or cancel"
    if req.blocker:
        return f"blocked: {req.blocker}"
    return ""


OPEN = ("waiting", "held", "executing")


def custody_offers(req: Any, perms: set[str], *, me: str, on_rota: bool, rota: str) -> list[Offer]:
    """Take, assign and hand over on a retirement: open cases only (`core.custody.offers`'s rules)."""
    return rota_rules.offers(
        rota_name=rota if req.status in OPEN else None,
        why_nobody=f"the request is {STATUS_WORDS.get(req.status, req.status)}",
        person=req.owner.get_username() if req.owner_id is not None else None,
        backup=req.backup.get_username() if req.backup_id is not None else None,
        me=me,
        on_rota=on_rota,
        perms=perms,
        rota_perm=VIEW,
        assign_perm=ASSIGN,
    )


def custody_words(req: Any) -> str:
    """The owner and backup of an open case; who held it last once it ended."""
    if req.owner_id is None:
        return "operators on call (group): nobody named yet" if req.status in OPEN else "nobody (the case has ended)"
    owner = req.owner.get_username()
    if req.status not in OPEN:
        return f"nobody now (the case has ended; {owner} held it)"
    backup = req.backup.get_username() if req.backup_id is not None else "none on the rota"
    return f"{owner} (backup: {backup})"


OUTCOMES = {
    "completed": "completed: the workspace was deleted",
    "cancelled": "cancelled: nothing deleted",
    "closed": "closed without purge: nothing deleted",
}


def status_words(req: Any, stalled: str | None, purge_refused: str = "") -> str:
    """The status as it reads now; a closed case its outcome."""
    if req.status in OUTCOMES:
        return OUTCOMES[req.status]
    if purge_refused:
        return "purge refused"
    if stalled:
        return "watcher stalled"
    return STATUS_WORDS.get(req.status, req.status)


def story(
    req: Any,
    stalled: str | None,
    purge_refused: str = "",
    *,
    times: tuple[datetime | None, datetime | None],
    rota: str,
) -> Story:
    """The one account of a retirement every face gives (`core.present.Story`). `times`: its next
    check and deadline (`policy.custody_times`); `rota`: the rota that holds open retirements."""
    next_check, deadline = times
    if deadline is None:
        due = ""
    elif req.status == "held":
        due = f"hold review by {present.absolute(deadline)} (a hold is looked at again by then)"
    else:
        due = f"eligible for deletion at {present.absolute(deadline)}"
    open_ = req.status in OPEN
    person = req.owner.get_username() if open_ and req.owner_id is not None else None
    backup = req.backup.get_username() if open_ and req.backup_id is not None else None
    if not open_:
        why = f"the request is {STATUS_WORDS.get(req.status, req.status)}"
    else:
        why = "" if person else f"{rota} (group): nobody named yet"
    return Story(
        status=req.status,
        status_words=status_words(req, stalled, purge_refused),
        question=open_question(req, stalled, purge_refused),
        owner=custody_words(req),
        person=person,
        backup=backup,
        rota=rota if open_ else None,
        why_nobody=why,
        next_check_at=next_check,
        deadline=due,
        deadline_at=deadline,
        closed=not open_,
    )


def panel(told: Story, req: Any) -> CasePanel:
    """The case page's first screen: the story (`story`), with what is changed and the watcher."""
    watcher, ws = req.watcher, req.workspace
    return CasePanel(
        what=f"Retire workspace {ws.slug} ({ws.name}); now {ws.get_lifecycle_display().lower()}",
        status=req.status,
        status_label=told.status_words,
        open_question=told.question,
        next_check_at=told.next_check_at,
        owner=told.owner,
        last_action=req.last_action or "-",
        attempt=f"watcher {str(watcher.id)[:8]} ({watcher.status})" if watcher else "no watcher",
        deadline=told.deadline,
        closed=told.closed,
    )


def actions(
    req: Any,
    perms: set[str],
    *,
    failed_notices: bool,
    now: datetime,
    stalled: str | None = None,
    alive_until: datetime | None = None,
    purge_refused: bool = False,
    open_alarms: Iterable[str] = (),
) -> list[Offer]:
    """Every action of a retirement case, each a link when it can act now, otherwise disabled with
    the reason: none is hidden. Resume watcher is disabled unless the watcher missed its wake-up or
    settled without concluding the request (`policy.resume_refusal`, the service's own rule);
    Close alarm unless an alarm no move answers is open (`open_alarms`: the kinds the page shows)."""
    status = req.status
    open_ = status in ("waiting", "held")
    label = STATUS_WORDS.get(status, status)
    past = "past the point of no return" if status in ("executing", "completed") else f"the request is {label}"
    hold_why = "" if status == "waiting" else ("already on hold" if status == "held" else past)
    release_why = "" if status == "held" else ("not on hold" if status == "waiting" else past)
    retry_notices_why = (
        ""
        if failed_notices and status in ("waiting", "held", "executing")
        else "no notice failed all its attempts: nothing to retry"
    )
    refused_why = "" if status == "executing" and purge_refused else "no purge was refused: nothing to retry or close"
    if open_:
        w = req.watcher
        resume_why = policy.resume_refusal(
            request_status=status,
            watcher_status=w.status if w is not None else None,
            stalled=stalled,
            next_wake_at=req.next_wake_at,
            alive_until=alive_until,
            now=now,
        )
    else:
        resume_why = f"{past}: no watcher is needed any more"
    return [
        offer("hold", "Hold", perm=HOLD, perms=perms, why_not=hold_why),
        offer("release", "Release", perm=HOLD, perms=perms, why_not=release_why),
        offer("retry-notices", "Retry failed notices", perm=RETRY, perms=perms, why_not=retry_notices_why),
        offer("retry-purge", "Retry the purge", perm=RESUME, perms=perms, why_not=refused_why),
        offer("close-refused", "Close without purge", perm=CANCEL, perms=perms, why_not=refused_why),
        offer("resume", "Resume watcher", perm=RESUME, perms=perms, why_not=resume_why),
        offer("cancel", "Cancel", perm=CANCEL, perms=perms, why_not="" if open_ else past),
        offer(
            "close-alarm",
            "Close alarm",
            perm=RESUME,
            perms=perms,
            why_not="" if policy.closable_alarms(open_alarms) else policy.NOTHING_TO_CLOSE,
        ),
    ]


STATUS_WORDS = {
    "waiting": "in its waiting period",
    "held": "on hold",
    "executing": "executing its purge",
    "completed": "completed",
    "cancelled": "cancelled",
    "closed": "closed without purge",
}


HOLD, CANCEL, RESUME, RETRY = (
    "retirements.hold_retirementrequest",
    "retirements.cancel_retirementrequest",
    "retirements.resume_retirementrequest",
    "retirements.retry_notices_retirementrequest",
)
VIEW, ASSIGN = "retirements.view_retirementrequest", "retirements.assign_retirementrequest"

# -- the timeline picture -------------------------------------------------------------------

CHAR_PX = 7.0  # a conservative width per character of the 12 px label font
ROW_PX = 18
AXIS_GAP = 26


@dataclass(frozen=True)
class Label:
    """A text box laid out so that no two boxes intersect."""

    x: int  # the box's left edge
    y: int  # the text's baseline
    width: int
    text: str
    anchor_x: int
    title: str


@dataclass(frozen=True)
class Mark:
    x: float
    kind: str  # notice | eligible | ponr | purged | requested | now | cancelled
    status: str
    label: Label
    planned: bool = False


@dataclass(frozen=True)
class Span:
    x1: float
    x2: float
    label: Label

    @property
    def width(self) -> float:
        return max(self.x2 - self.x1, 2)


@dataclass(frozen=True)
class Tick:
    x: float
    text: str


@dataclass(frozen=True)
class Timeline:
    width: int
    height: int
    axis_y: int
    start: datetime
    end: datetime
    marks: list[Mark]
    holds: list[Span]
    ticks: list[Tick]


TICK_STEPS = [
    timedelta(minutes=1),
    timedelta(minutes=5),
    timedelta(minutes=15),
    timedelta(hours=1),
    timedelta(hours=6),
    timedelta(days=1),
    timedelta(days=7),
    timedelta(days=30),
]


def _ticks(start: datetime, end: datetime, x: Any, width: int) -> list[Tick]:
    most = max(2, width // 110)
    step = next((s for s in TICK_STEPS if (end - start) / s <= most), TICK_STEPS[-1])
    first = datetime.fromtimestamp(
        -(-start.timestamp() // step.total_seconds()) * step.total_seconds(), tz=start.tzinfo
    )
    fmt = "%b %d" if step >= timedelta(days=1) else ("%b %d %H:%M" if step >= timedelta(hours=6) else "%H:%M")
    out = []
    t = first
    while t <= end:
        out.append(Tick(x(t), t.strftime(fmt)))
        t += step
    return out


def _layout(items: list[tuple[float, str, str]], width: int, axis_y: int) -> list[Label]:
    """Greedy rows: each label takes the nearest row (alternating above and below the axis)
    where its box does not meet a box already placed. Returns labels in input order."""
    rows: list[list[tuple[float, float]]] = []
    placed: dict[int, Label] = {}
    for index in sorted(range(len(items)), key=lambda i: items[i][0]):
        anchor, text, title = items[index]
        w = len(text) * CHAR_PX + 8
        left = min(max(anchor - w / 2, 2), width - w - 2)
        row = 0
        while True:
            if row == len(rows):
                rows.append([])
            if all(left + w + 6 <= a or b + 6 <= left for a, b in rows[row]):
                break
            row += 1
        rows[row].append((left, left + w))
        level = row // 2 + 1
        y = axis_y - AXIS_GAP - (level - 1) * ROW_PX if row % 2 == 0 else axis_y + AXIS_GAP + 10 + (level - 1) * ROW_PX
        placed[index] = Label(round(left), round(y), round(w), text, round(anchor), title)
    return [placed[i] for i in range(len(items))]


def timeline(req: Any, notices: list[Any], decisions: list[Any], now: datetime, *, width: int = 800) -> Timeline:
    """Requested → notices → eligible → point of no return → deleted, with holds as spans.

    Future eligibility and the planned point of no return are drawn ahead of time; the
    date axis has ticks in even steps; labels never overlap (`_layout`)."""
    start = req.requested_at
    happened = {d.action for d in decisions}
    closed = req.status in ("completed", "cancelled", "closed")
    last = max([req.eligible_at, now if not closed else start, *(d.created_at for d in decisions)])
    end = last + max((last - start) / 12, timedelta(minutes=1))
    left, right = 16, width - 16

    def x(t: datetime) -> int:
        span = (end - start).total_seconds() or 1
        return round(left + (right - left) * min(max((t - start).total_seconds() / span, 0), 1))

    raw: list[tuple[float, str, str, str, bool, str]] = [(x(start), "requested", "requested", "", False, _abs(start))]
    for n in notices:
        at = n.delivered_at or n.due_at
        why = f" · {n.moved_because}" if n.moved_because else ""  # a re-planned or suppressed slot says why
        raw.append((x(at), f"{n.kind.replace('_', ' ')}: {n.status}", "notice", n.status, False, _abs(at) + why))
    if "point_of_no_return" not in happened and not closed:
        raw.append(
            (x(req.eligible_at), "eligible · point of no return (planned)", "eligible", "", True, _abs(req.eligible_at))
        )
    else:
        raw.append((x(req.eligible_at), "eligible", "eligible", "", False, _abs(req.eligible_at)))
    for d in decisions:
        word = {
            "point_of_no_return": ("point of no return", "ponr"),
            "purged": ("deleted", "purged"),
            "cancel": ("cancelled", "cancelled"),
            "boundary_close": ("closed", "cancelled"),
        }.get(d.action)
        if word:
            raw.append((x(d.created_at), word[0], word[1], "", False, _abs(d.created_at)))
    if not closed:
        raw.append((x(now), "now", "now", "", False, _abs(now)))

    spans: list[tuple[float, float, str, str]] = []
    opened: datetime | None = None
    for d in decisions:
        if d.action in ("hold", "boundary_hold"):
            opened = d.created_at
        elif d.action == "release" and opened is not None:
            spans.append(
                (
                    x(opened),
                    x(d.created_at),
                    f"held {present.span((d.created_at - opened).total_seconds())}",
                    _abs(opened),
                )
            )
            opened = None
    if opened is not None:
        spans.append((x(opened), x(now), "on hold", _abs(opened)))

    axis_y = 0  # laid out around 0, shifted below
    labels = _layout(
        [(m[0], m[1], m[5]) for m in raw] + [((a + b) / 2, text, title) for a, b, text, title in spans], width, axis_y
    )
    top = min([lb.y - 14 for lb in labels] + [-AXIS_GAP])
    bottom = max([lb.y + 6 for lb in labels] + [AXIS_GAP + 24])
    shift = round(-top + 6)
    labels = [replace(lb, y=round(lb.y + shift)) for lb in labels]
    axis = int(shift)
    marks = [Mark(m[0], m[2], m[3], labels[i], planned=m[4]) for i, m in enumerate(raw)]
    holds = [Span(a, b, labels[len(raw) + i]) for i, (a, b, _t, _ti) in enumerate(spans)]
    ticks = _ticks(start, end, x, width)
    return Timeline(width, int(bottom + shift + 20), axis, start, end, marks, holds, ticks)


def _abs(at: datetime) -> str:
    return present.absolute(at)
