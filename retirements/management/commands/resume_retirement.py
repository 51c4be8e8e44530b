from typing import Any

from core.authority import Actor
from core.commands import NO_REASON, DecisionCommand
from retirements import selectors
from retirements.services import retirement_resume


class Command(DecisionCommand):
    help = "Replace a stalled watcher (refused while the current one still runs)."
    reason = NO_REASON

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        request = retirement_resume(actor=actor, request_id=selectors.get(request_id).id)
        return selectors.summary(request.id, "id", "status", "next_wake_at", "watchers")
