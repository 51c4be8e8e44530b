"""The django-q2 cluster as a service runs it: stops cleanly on SIGTERM to this process alone
or to its whole process group (systemd's KillMode=control-group, Docker, Kubernetes).

qcluster itself does not survive a group SIGTERM: its sentinel and workers die at once (a
running stage keeps its lease until it expires) and the main process then waits. So the
cluster runs in a session of its own, where a group signal cannot reach it, and this process
passes one SIGTERM to its main process: the sentinel stops taking tasks, each worker finishes
its current run (bounded by DELETION_TASK_SECONDS plus one stage) and releases its lease.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

PR_SET_PDEATHSIG = 1


def _stop_with_parent() -> None:
    """In the child: if this wrapper dies (even by SIGKILL), the cluster gets SIGTERM."""
    with contextlib.suppress(OSError):  # not Linux: the cluster outlives a killed wrapper, as qcluster would
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Command(BaseCommand):
    help = "Run the django-q2 cluster; SIGTERM (to this process or its group) stops it cleanly."

    def handle(self, *args: Any, **options: Any) -> None:
        manage = Path(settings.BASE_DIR) / "manage.py"
        cluster = subprocess.Popen(
            [sys.executable, str(manage), "qcluster"], start_new_session=True, preexec_fn=_stop_with_parent
        )
        stopping = False

        def stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            if not stopping:  # one stop request: a second SIGTERM from the group changes nothing
                stopping = True
                self.stderr.write(f"run_workers: signal {signum}; stopping the cluster (pid {cluster.pid})")
                cluster.send_signal(signal.SIGTERM)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        code = cluster.wait()
        if code not in (0, -signal.SIGTERM) and not stopping:
            raise CommandError(f"the cluster exited with {code}", returncode=1)
