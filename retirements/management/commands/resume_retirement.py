from retirements.management.decision import NO_REASON, DecisionCommand
from retirements.services import retirement_resume


class Command(DecisionCommand):
    help = "Replace a stalled watcher (refused while the current one still runs)."
    service = retirement_resume
    reason = NO_REASON
    shows = ("id", "status", "next_wake_at", "watchers")
