from typing import Any

from core.authority import Actor
from core.commands import DecisionCommand
from retirements import selectors
from retirements.services import retirement_retry_purge


class Command(DecisionCommand):
    help = "Run a refused purge again once the requester holds request_retirement again (the boundary rechecks)."

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        request = retirement_retry_purge(actor=actor, request_id=selectors.get(request_id).id, **extra)
        return selectors.summary(request.id, "id", "status", "workspace", "purge_job", "owner")
