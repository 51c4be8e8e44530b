from retirements.management.decision import REASON_OPTIONAL, DecisionCommand
from retirements.services import retirement_release


class Command(DecisionCommand):
    help = "Release a hold: eligibility moves by the time on hold and notices are re-planned."
    service = retirement_release
    reason = REASON_OPTIONAL
    shows = ("id", "status", "eligible_at", "next_wake_at", "notices")
