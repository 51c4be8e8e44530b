"""Demo data for `make run`: a living back-office for a newcomer. Development only."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, User

from core import authority, clock
from core.authority import Actor
from deletions import services as deletions
from deletions import worker
from deletions.models import DeletionRequest
from deletions.users.handlers import RunOptions
from retirements import services as retirements
from retirements.models import Lifecycle, Workspace

DEMO_USERS = [
    ("operator-1", "operators"),
    ("approver-1", "approvers"),
    ("support-1", "support (read-only)"),
]


def ensure_users(password: str, *, reset: bool) -> list[str]:
    """The demo staff logins, in their groups; a new login (or every one with `reset`) gets `password`.
    Returns the logins that got it."""
    given = []
    for username, group in DEMO_USERS:
        user, created = User.objects.get_or_create(username=username, defaults={"email": f"{username}@localhost"})
        user.is_staff = True
        if created or reset:
            user.set_password(password)
            given.append(f"{username} ({group})")
        user.save()
        user.groups.set(Group.objects.filter(name=group))
    return given


def seed(demo_user: Any) -> bool:
    """Create demo cases once; False when they already exist."""
    if DeletionRequest.objects.filter(target="demo:alice").exists():
        return False
    operator = authority.named("operator-1")
    approver = authority.named("approver-1")

    def submit(target: str) -> DeletionRequest:
        return deletions.deletion_submit(actor=operator, target=target)

    def approve(req: DeletionRequest) -> None:
        deletions.deletion_approve(actor=approver, request_id=req.id, digest=req.inventory_digest)

    submit("demo:alice")
    approve(submit("demo:bob"))
    carol = submit("demo:carol")
    approve(carol)
    worker.run(carol.id, executor_id="demo-worker", options=RunOptions(no_agents_in=frozenset()))
    dave = submit("demo:dave")
    approve(dave)
    worker.run(dave.id, executor_id="demo-worker", options=RunOptions(fail_stage="purge_db"))  # a saved failure
    erin = submit("demo:erin")
    deletions.deletion_cancel(actor=operator, request_id=erin.id, reason="duplicate of another ticket")

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
        actor=Actor.of(demo_user), slug="initech-old", reason="contract ended in October", confirmation="initech-old"
    )
    return True
