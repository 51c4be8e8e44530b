from retirements.management.decision import DecisionCommand
from retirements.services import retirement_hold


class Command(DecisionCommand):
    help = "Hold a retirement in its waiting period (a reason is required)."
    service = retirement_hold
    shows = ("id", "status", "hold", "eligible_at")
