"""What a reader sees of a deletion case: the JSON `show_deletion --json` prints and the API
answers, one shape for both."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from core import access
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
    unsettled = selectors.unsettled(req.id)
    held = case.custodians(req, now, unsettled)
    silent = targets.silence(req.target)
    data["request"]["open_question"] = case.waiting_on_receiver(req, now, silent, unsettled)  # the page's words
    return lens.data(
        {
            "responsible": held.person,
            "backup": held.backup,
            "responsible_why": held.why or None,
            "due_at": req.due_at.isoformat(),
            "received_at": req.received_at.isoformat(),
            "days_left": case.days_left(req, now),
            **data,
            "proposal": proposal.of_request(req).as_json(),
        },
        target=req.target,
    )


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
