"""What a reader sees of a deletion case: the JSON `show_deletion --json` prints and the API
answers, one shape for both."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from core import access
from core.present import Story
from deletions import case, evidence, proposal, selectors, targets


def case_view(request_id: str | UUID, *, lens: access.Lens, now: datetime) -> dict[str, Any]:
    """A case as `show_deletion` and the API give it to a reader (`core.access.Lens`): custody and
    deadline, the request, approvals, stages with their evidence, and what an approver verifies,
    all passed once through the reader's lens (the target masked wherever it appears, target
    evidence withheld, for those the access table says). Each stage's evidence is what its receipt
    says (`believed`)."""
    data = selectors.inspect(request_id)
    req = selectors.get_request(request_id)
    believed(data, req, now)
    told = story_of(req, now)
    # The page's words and times (`case.story`), never the saved columns they are read from: a saved
    # next check a live worker's lease has overtaken, a question the state answers differently.
    data["request"]["open_question"] = told.question
    data["request"]["next_check_at"] = told.next_check_at.isoformat() if told.next_check_at else None
    return lens.data(
        {
            "story": told.as_json(),
            "responsible": told.person,
            "backup": told.backup,
            "responsible_why": told.why_nobody or None,
            "due_at": req.due_at.isoformat(),
            "received_at": req.received_at.isoformat(),
            "days_left": case.days_left(req, now),
            **data,
            # Who decided what and why, in their own words (the page's timeline), masked like the rest.
            "decisions": [
                {"at": d.created_at.isoformat(), "by": d.actor_label, "action": d.action, "reason": d.reason}
                for d in req.decisions.order_by("created_at", "id")
            ],
            "proposal": proposal.of_request(req).as_json(),
            "reapplied": case.reapplied_words(list(req.reapplications.values_list("answer", flat=True))) or None,
        },
        target=req.target,
    )


def story_of(
    req: Any,
    now: datetime,
    *,
    unsettled: bool | None = None,
    silent: str | None = None,
    applied: int | None = None,
) -> Story:
    """`case.story` from the saved rows: what it needs and was not given is read here (whether the
    current stage's effect is unsettled, the receiver's silence, a cancelled case's applied stages),
    so every face passes the same facts."""
    if unsettled is None:
        # annotated by a list's query (`selectors.UNSETTLED`), else read
        unsettled = bool(req.unsettled) if hasattr(req, "unsettled") else selectors.unsettled(req.id)
    if silent is None:
        silent = targets.silence(req.target)
    if applied is None and req.status == "cancelled":
        applied = selectors.applied_stages(req.id)
    return case.story(req, now, unsettled, silent=silent, applied=applied)


def believed(data: dict[str, Any], req: Any, now: datetime) -> None:
    """`selectors.inspect`'s stages as believed (`evidence.of_case`): each stage's evidence and saved
    result what its receipt says, how it is believed, and each mismatch named (`evidence_faults`; the
    values saved and signed under `evidence`, which the lens withholds from those who may not see it)."""
    stages = selectors.case_stages(req.id)
    checked = evidence.of_case(req, stages, now)
    shown = {str(s.id): s for s in checked.shown(stages)}
    for stage in data["stages"]:
        row, belief = shown.get(stage["id"]), checked.beliefs.get(UUID(stage["id"]))
        if row is None or belief is None:
            continue
        stage["evidence"], stage["metadata_json"] = row.evidence, row.metadata
        stage["believed"] = belief.how
    data["evidence_faults"] = [
        {
            "stage_id": str(f.stage_id),
            "fault": f.words(values=False),
            "evidence": f.words(values=True),
        }
        for f in checked.faults
    ]


WAITS = {"person": "you hold it", "backup": "you are its backup", "rota": "your rota: nobody named yet"}


def waiting_for(user: Any, rotas: list[str], now: datetime, limit: int) -> list[tuple[Any, Story, str]]:
    """The open cases waiting on `user` now, as their stories say (`Story.waits_on`), each with its
    story and how it waits on them (`WAITS`), soonest due first; at most `limit`, read from up to
    four times as many candidates (`selectors.waiting_for`)."""
    silence = targets.silences()
    out = []
    for r in selectors.waiting_for(user, rotas).order_by("due_at", "id")[: limit * 4]:
        told = story_of(r, now, silent=silence(r.target))
        how = told.waits_on(user.get_username(), rotas)
        if how and case.may_hold(r, user):
            out.append((r, told, WAITS[how]))
    return out[:limit]
