"""Test-only crash and pause points: a real SIGKILL or SIGSTOP at a named moment.

Active only when CRASH_AT (SIGKILL) or PAUSE_AT (SIGSTOP) names the point, and never in production:
there each side's settings refuse to start with either set (`MACHINERY`), and each side passes its
settings' word (`production`), so the points are inert whatever the environment says later. Tests use
them to kill or freeze a process exactly between two saved steps.
"""

import os
import signal

MACHINERY = ("CRASH_AT", "PAUSE_AT")  # the environment variables production refuses to start with


def crash_point(name: str, *, production: bool) -> None:
    if production:
        return
    if os.environ.get("CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get("PAUSE_AT") == name:
        os.kill(os.getpid(), signal.SIGSTOP)  # resumes on SIGCONT
