from retirements.management.decision import DecisionCommand
from retirements.services import retirement_cancel


class Command(DecisionCommand):
    help = "Cancel a retirement before the point of no return; the workspace returns to disabled."
    service = retirement_cancel
    shows = ("id", "status", "workspace", "conclusion")
