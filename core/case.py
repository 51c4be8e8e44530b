"""The case panel every request shows at a glance (SPEC 5.1)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class CasePanel:
    what: str
    status: str
    status_label: str
    open_question: str
    next_check_at: datetime | None
    owner: str
    last_action: str
    attempt: str
