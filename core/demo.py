"""Demo data for `make run`: a living back-office for a newcomer. Development only."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, User

from deletions import clock, worker
from deletions.models import DeletionRequest
from deletions.users import service as deletions
from deletions.users.handlers import RunOptions
from retirements import services as retirements
from retirements.models import Lifecycle, Workspace

DEMO_USERS = [
    ("operator-1", "operators"),
    ("approver-1", "approvers"),
    ("support-1", "support (read-only)"),
]


def ensure_users(password: str) -> list[str]:
    logins = []
    for username, group in DEMO_USERS:
        user, _ = User.objects.get_or_create(username=username, defaults={"email": f"{username}@localhost"})
        user.is_staff = True
        user.set_password(password)
        user.save()
        user.groups.set(Group.objects.filter(name=group))
        logins.append(f"{username} ({group})")
    return logins


def seed(demo_user: Any) -> bool:
    """Create demo cases once; False when they already exist."""
    if DeletionRequest.objects.filter(target="demo:alice").exists():
        return False
    approve = lambda req: deletions.deletion_approve(  # noqa: E731
        request_id=req.id, approved_by="approver-1", digest=req.inventory_digest
    )
    deletions.deletion_submit(target="demo:alice", requested_by="operator-1")
    approve(deletions.deletion_submit(target="demo:bob", requested_by="operator-1"))
    carol = deletions.deletion_submit(target="demo:carol", requested_by="operator-1")
    approve(carol)
    worker.run(carol.id, executor_id="demo-worker", options=RunOptions(no_agents_in=frozenset()))
    dave = deletions.deletion_submit(target="demo:dave", requested_by="operator-1")
    approve(dave)
    worker.run(dave.id, executor_id="demo-worker", options=RunOptions(fail_stage="purge_db"))  # a saved failure
    erin = deletions.deletion_submit(target="demo:erin", requested_by="operator-1")
    deletions.deletion_cancel(request_id=erin.id, cancelled_by="operator-1", reason="duplicate of another ticket")

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
    retirements.retirement_request(
        actor=demo_user, slug="initech-old", reason="contract ended in October", confirmation="initech-old"
    )
    return True
