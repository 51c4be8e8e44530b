from typing import Any

from core.authority import Actor
from core.commands import DecisionCommand
from retirements import selectors
from retirements.services import retirement_resume


class Command(DecisionCommand):
    help = (
        "Replace a watcher that missed its wake-up by 15 minutes or settled without concluding the request "
        "(refused otherwise)."
    )

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        request = retirement_resume(actor=actor, request_id=selectors.get(request_id).id, **extra)
        return selectors.summary(request.id, "id", "status", "next_wake_at", "watchers")
