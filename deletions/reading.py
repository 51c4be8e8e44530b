"""What a reader sees of a deletion case: the JSON `show_deletion --json` prints and the API
answers, one shape for both."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any
from uuid import UUID

from core import access
from deletions import case, proposal, selectors


def case_view(request_id: str | UUID, *, roles: frozenset[str], now: datetime) -> dict[str, Any]:
    """A case as `show_deletion --json` and the API give it to a reader with these roles
    (`core.access`): custody and deadline, the request, approvals, stages with their evidence, and
    what an approver verifies. A reader who may not see targets gets them masked, and one who may
    not see target evidence gets none."""
    data = selectors.inspect(request_id)
    req = selectors.get_request(request_id)
    what = proposal.of_request(req)
    if not access.sees(roles, access.TARGETS):
        shown = access.mask(req.target)
        data["request"]["target"] = data["request"]["inventory"]["target"] = shown
        what = dataclasses.replace(what, target=shown)
    if not access.sees(roles, access.EVIDENCE):
        for stage in data["stages"]:
            stage["evidence"] = None
    held = case.custodians(req, now, selectors.unsettled(req.id))
    return {
        "responsible": held.person,
        "backup": held.backup,
        "responsible_why": held.why or None,
        "due_at": req.due_at.isoformat(),
        "received_at": req.received_at.isoformat(),
        "days_left": case.days_left(req, now),
        **data,
        "proposal": what.as_json(),
    }
