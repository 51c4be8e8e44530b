"""Test-only crash and pause points: a real SIGKILL or SIGSTOP at a named moment.

Active only when CRASH_AT (SIGKILL) or PAUSE_AT (SIGSTOP) names the point; tests
use them to kill or freeze a worker process exactly between two saved steps.
`DELETION_CRASH_AT` is the older name of CRASH_AT and still works.
"""

import os
import signal


def crash_point(name: str) -> None:
    if name in (os.environ.get("CRASH_AT"), os.environ.get("DELETION_CRASH_AT")):
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get("PAUSE_AT") == name:
        os.kill(os.getpid(), signal.SIGSTOP)  # resumes on SIGCONT
