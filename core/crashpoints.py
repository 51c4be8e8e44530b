"""Test-only crash and pause points: a real SIGKILL or SIGSTOP at a named moment.

Active only when CRASH_AT (SIGKILL) or PAUSE_AT (SIGSTOP) names the point, and never in
production: there the settings refuse to start with either set, and the points are inert
whatever the environment says later. Tests use them to kill or freeze a worker process
exactly between two saved steps.
"""

import os
import signal

from django.conf import settings


def crash_point(name: str) -> None:
    if getattr(settings, "PRODUCTION", False):
        return
    if os.environ.get("CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get("PAUSE_AT") == name:
        os.kill(os.getpid(), signal.SIGSTOP)  # resumes on SIGCONT
