"""The django-q2 clusters as a service runs them: the stage cluster (deletion stages, purges;
Q_WORKERS workers) and the control cluster (the schedules: heartbeat, dispatcher, watchers and
their notices; Q_CONTROL_WORKERS workers), so long stages filling every stage worker never delay
the control work. Both stop cleanly on SIGTERM to this process alone or to its whole process
group (systemd's KillMode=control-group, Docker, Kubernetes).

qcluster itself does not survive a group SIGTERM: its sentinel and workers die at once (a
running stage keeps its lease until it expires) and the main process then waits. So each
cluster runs in a session of its own, where a group signal cannot reach it, and this process
passes one SIGTERM to each main process: the sentinel stops taking tasks, a run a worker takes
from the tasks it had prefetched goes back to the queue untouched, and each running one stops at
its next stage boundary and releases its lease (`core.queue.STOP_FILE`, created first).
A second Ctrl-C (or SIGTERM after the first) stops at once with SIGKILL: every lease a worker
held then expires and the next worker settles what it left from the target's record.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.queue import CONTROL, STOP_FILE

PR_SET_PDEATHSIG = 1


def _stop_with_parent() -> None:
    """In the child: if this wrapper dies (even by SIGKILL), the cluster gets SIGTERM."""
    with contextlib.suppress(OSError):  # not Linux: the cluster outlives a killed wrapper, as qcluster would
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Command(BaseCommand):
    help = (
        "Run the stage cluster and the control cluster (django-q2); SIGTERM (to this process or its group) "
        "stops both cleanly, a second one at once."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        manage = Path(settings.BASE_DIR) / "manage.py"
        told = Path(tempfile.mkdtemp(prefix="backoffice-workers-")) / "stop"  # core.queue.STOP_FILE
        env = {k: v for k, v in os.environ.items() if k != "Q_CLUSTER_NAME"} | {STOP_FILE: str(told)}
        clusters = {
            name: subprocess.Popen(
                [sys.executable, str(manage), "qcluster"],
                env=extra,
                start_new_session=True,
                preexec_fn=_stop_with_parent,
            )
            for name, extra in (("stage", env), (CONTROL, {**env, "Q_CLUSTER_NAME": CONTROL}))
        }
        stops = 0
        lease = settings.DELETION_LEASE_SECONDS

        def stop(signum: int, frame: Any) -> None:
            nonlocal stops
            stops += 1
            if stops == 1:  # one stop request: the group's copy of the same signal changes nothing
                told.touch()  # before the clusters hear it: no worker takes a prefetched run after this
                self.stderr.write(
                    f"run_workers: signal {signum}; stopping the clusters. Runs not started go back to the queue; "
                    "each running one stops at its next stage boundary and releases its lease; a second Ctrl-C "
                    f"stops at once (the leases then expire within {lease} s and the next worker takes over)."
                )
                for proc in clusters.values():
                    with contextlib.suppress(ProcessLookupError):
                        proc.send_signal(signal.SIGTERM)
            elif signum == signal.SIGINT or stops > 2:  # a person's second Ctrl-C, or a third signal
                self.stderr.write("run_workers: stopping at once; the leases held expire on their own")
                for proc in clusters.values():
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        failed = ""
        while any(p.poll() is None for p in clusters.values()):
            for name, proc in clusters.items():
                code = proc.poll()
                if code is not None and code not in (0, -signal.SIGTERM) and not stops and not failed:
                    failed = f"the {name} cluster exited with {code}"
                    stop(signal.SIGTERM, None)  # never half a service: the other one stops too
            time.sleep(0.2)
        shutil.rmtree(told.parent, ignore_errors=True)
        if failed:
            raise CommandError(failed, returncode=1)
