"""Demo data for `make run`: a living back-office for a newcomer. Development only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import Group, User
from django.test import override_settings

from core import authority, clock
from core.authority import Actor
from core.store import connection_url
from deletions import retry, targets, worker
from deletions import services as deletions
from deletions.handlers import RunOptions
from deletions.models import DeletionRequest
from retirements import services as retirements
from retirements.models import Lifecycle, Workspace
from samples.demo import inprocess
from samples.demo.seed import TOUR

DEMO_USERS = [
    ("operator-1", "operators"),
    ("operator-2", "operators"),  # the operators' rota names a backup too
    ("approver-1", "approvers"),
    ("approver-2", "approvers"),
    ("support-1", "support (read-only)"),
    ("auditor-1", "auditors"),  # reads every case and its proof, decides nothing
]
INTAKE_ACCOUNT = ("intake-portal", "intake")  # a privacy portal's service account: submits and reads, no login
READ_ONLY = {"support-1", "auditor-1"}


def ensure_intake_account() -> User:
    user, _ = User.objects.get_or_create(username=INTAKE_ACCOUNT[0], defaults={"email": "portal@localhost"})
    user.is_staff = True
    user.set_unusable_password()
    user.save()
    user.groups.set(Group.objects.filter(name=INTAKE_ACCOUNT[1]))
    return user


def ensure_tokens(usernames: list[str], folder: Path) -> list[str]:
    """A personal token for each demo person in `folder/<username>` (only they may read it), kept
    while it still works, else a new one: what the README's command lines use. Returns the
    people who got a new one."""
    from core import tokens

    folder.mkdir(mode=0o700, exist_ok=True)
    made = []
    for username in usernames:
        path = folder / username
        user = User.objects.get(username=username)
        if path.exists():
            try:
                if tokens.use(path.read_text()).actor.user.pk == user.pk:
                    continue
            except tokens.Unauthenticated:
                pass
        scope = tokens.READ if username in READ_ONLY else tokens.DECIDE
        raw = tokens.issue(user, name="demo command line", scope=scope)
        path.touch(mode=0o600)
        path.write_text(raw)
        made.append(username)
    return made


def ensure_users(password: str, *, reset: bool) -> list[str]:
    """The demo staff logins, in their groups; a new login (or every one with `reset`) gets `password`.
    Returns the logins that got it."""
    given = []
    hashed = ""  # the demo logins share one password: hashed once (each hash takes most of a second)
    for username, group in DEMO_USERS:
        user, created = User.objects.get_or_create(username=username, defaults={"email": f"{username}@localhost"})
        user.is_staff = True
        if created or reset:
            hashed = hashed or make_password(password)
            user.password = hashed
            given.append(f"{username} ({group})")
        user.save()
        user.groups.set(Group.objects.filter(name=group))
    return given


def seed(demo_user: Any) -> list[str]:
    """Create demo cases once, each left in a state that lasts (it waits on a person, or on
    a retry due later), through the real services and workers; returns one line per case
    saying which state it shows, or [] when they already exist.

    Histories are made honestly: the failing cases were run by the real worker at earlier
    times (time-machine moves the clock back, then forward to each retry), and the
    effect-unknown case comes from a worker process killed right after it submitted.
    """
    if DeletionRequest.objects.filter(target="demo:alice").exists():
        return []
    import time_machine  # development only (requirements-dev.txt)

    # The README's people, in the demo application the receiver serves (test machinery: its database
    # is mounted in this process, as for the back-dated history below).
    inprocess.mount()
    for name in TOUR:
        inprocess.enroll(f"demo:{name}", 2)

    operator = authority.named("operator-1")
    approver = authority.named("approver-1")
    # Requests come in through the privacy portal: a submitter never holds their own case, so both
    # operators and both approvers stay on each case's rota (a person and a backup).
    portal = Actor.of(ensure_intake_account())
    start = clock.now()
    shown: list[str] = []

    def submit(target: str, reason: str) -> DeletionRequest:
        return deletions.deletion_submit(actor=portal, target=target, reason=reason)

    def approve(req: DeletionRequest) -> None:
        deletions.deletion_approve(actor=approver, request_id=req.id, digest=req.inventory_digest)

    def fail_until(req: DeletionRequest, failures: int) -> None:
        """Run the real worker with an injected failure at each retry time."""
        for _ in range(failures):
            req.refresh_from_db()
            if req.next_attempt_at is not None:
                traveller.move_to(req.next_attempt_at + timedelta(seconds=1))
            worker.run(req.id, executor_id="demo-worker", options=RunOptions(fail_stage="purge_db"))

    submit("demo:alice", "ticket DEL-101")
    shown.append("demo:alice  waiting for approval (approve it as approver-1)")

    # History made with the clock moved back: a receiver in its own process would refuse calls signed
    # hours ago (and grants whose lease ended then), so while the clock is moved the same receiver's
    # application takes them in this process, on the same demo database (its settings allow it only
    # outside production; the rest of the demo goes over HTTP).
    registered = next(r.base_url for r in targets.registered() if r.prefix == "demo:")  # (its calls signed for it)
    with (
        override_settings(RECEIVER_IN_PROCESS="samples.demo.inprocess.application", RECEIVER_PUBLIC_URL=registered),
        time_machine.travel(start - timedelta(hours=3, minutes=10), tick=False) as traveller,
    ):
        frank = submit("demo:frank", "ticket DEL-106")
        approve(frank)
        fail_until(frank, retry.MAX_CONSECUTIVE_FAILURES)
        traveller.move_to(start - timedelta(minutes=20))
        dave = submit("demo:dave", "ticket DEL-104")
        approve(dave)
        fail_until(dave, 6)  # the 6th failure waits 16 min: its retry is due after now
    shown.append("demo:frank  needs attention: purge_db failed 10 times in 3 h (resume or cancel)")
    shown.append("demo:dave   waiting to retry: 6 failures, the next retry due in about 12 min")

    carol = submit("demo:carol", "ticket DEL-103")
    approve(carol)
    worker.run(carol.id, executor_id="demo-worker", options=RunOptions())
    shown.append("demo:carol  completed")

    erin = submit("demo:erin", "ticket DEL-105")
    deletions.deletion_cancel(actor=operator, request_id=erin.id, reason="duplicate of another ticket")
    shown.append("demo:erin   cancelled before approval")

    heidi = submit("demo:heidi", "ticket DEL-108")
    approve(heidi)
    worker.run(heidi.id, executor_id="demo-worker", next_step=True)  # the gate ran under the approval
    deletions.deletion_revoke_approval(actor=approver, request_id=heidi.id, reason="the ticket was reopened")
    worker.run(heidi.id, executor_id="demo-worker")  # the receiver refuses: nothing applied
    shown.append("demo:heidi  back in review: the receiver refused the revoked approval")

    judy = submit("manual:vendor-crm/judy@example.com", "ticket DEL-109")
    approve(judy)
    worker.run(judy.id, executor_id="demo-worker")  # no effect is sent there: gate_user is handed to a person
    shown.append(
        "manual:vendor-crm/judy@example.com  waiting for an operator to apply gate_user by hand in the vendor's "
        "console and record it (Record effect applied by hand)"
    )

    grace = submit("demo:grace", "ticket DEL-107")
    approve(grace)
    _worker_killed_after_submit(grace)
    shown.append(
        "demo:grace  submitted, its worker killed: when the dead worker's lease runs out (15 min) the cluster "
        "looks the operation up at the target and, finding it not applied past the submission, sends it once"
    )

    bob = submit("demo:bob", "ticket DEL-102")
    approve(bob)
    shown.append(
        "demo:bob    approved; under `make run` it runs slowly (DELETION_DEMO_STAGE_DELAY_MS) so the live "
        "page shows progress for about 15 min"
    )

    now = clock.now()
    for slug, name, lifecycle, activated in (
        ("acme", "Acme Corp", Lifecycle.ACTIVE, True),
        ("globex-old", "Globex (old)", Lifecycle.DISABLED, True),
        ("initech-old", "Initech (old)", Lifecycle.DISABLED, True),
        ("hooli-trial", "Hooli trial", Lifecycle.DISABLED, False),
        ("umbrella-old", "Umbrella (old)", Lifecycle.DELETING, True),
        ("wayne-old", "Wayne (old)", Lifecycle.DELETED, True),
    ):
        Workspace.objects.get_or_create(
            slug=slug,
            defaults={
                "name": name,
                "lifecycle": lifecycle,
                "activated_at": now if activated else None,
                "created_at": now,
            },
        )
    staff = Actor.of(demo_user)
    retirements.retirement_request(
        actor=staff, slug="initech-old", reason="contract ended in October", confirmation="initech-old"
    )
    shown.append("initech-old retirement waiting: 30 days with notices")
    held = retirements.retirement_request(
        actor=staff, slug="globex-old", reason="customer asked to close", confirmation="globex-old"
    )
    retirements.retirement_hold(actor=staff, request_id=held.id, reason="owner disputes the request")
    shown.append("globex-old  retirement on hold")
    # What the custody schedule does within a minute of each move: name the person and backup.
    deletions.deletion_name_by_rota()
    retirements.retirement_name_by_rota()
    return shown


def _worker_killed_after_submit(req: DeletionRequest) -> None:
    """A real worker process, killed (SIGKILL) right after it saved "submitted" for its stage."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDDED_PG")}
    # Its lease (15 minutes) outlasts the demo's first look; then the cluster looks the operation up.
    # It reports at the deployment's pace, so the faces' "not reporting since" is true of it too.
    env.update(
        DATABASE_URL=connection_url(),
        DEMO_DATABASE_URL=connection_url(inprocess.ALIAS),
        CRASH_AT="after-submit-mark",
        DELETION_LEASE_SECONDS="900",
        DELETION_HEARTBEAT_SECONDS=str(settings.DELETION_HEARTBEAT_SECONDS),
        PYTHONUNBUFFERED="1",
    )
    manage = Path(settings.BASE_DIR) / "manage.py"
    done = subprocess.run(
        [sys.executable, str(manage), "run_deletion", str(req.id), "--next-step", "--executor-id", "demo-lost-worker"],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    if done.returncode != -signal.SIGKILL:
        raise RuntimeError(f"the demo worker was to be killed after submitting; it exited {done.returncode}")
