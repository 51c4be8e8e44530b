"""Test-only crash points: a real SIGKILL at a named moment.

Active only when DELETION_CRASH_AT names the point; tests use it to kill a
worker process exactly between two saved steps.
"""

import os
import signal


def crash_point(name: str) -> None:
    if os.environ.get("DELETION_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
