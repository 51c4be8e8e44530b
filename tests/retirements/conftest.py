from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User

from core import clock
from retirements.models import Lifecycle, Workspace
from tests.support import table_rows

TABLES = [
    "retirements_workspace",
    "retirements_retirementrequest",
    "retirements_noticeslot",
    "retirements_retirementwatcher",
    "retirements_purgejob",
    "retirements_decision",
    "retirements_alarm",
]


def retirement_rows() -> dict[str, list[tuple[Any, ...]]]:
    return table_rows(*TABLES)


def make_staff(username: str, *perms: str, email: str | None = None) -> User:
    user = User.objects.create_user(username, email=email or f"{username}@hq.example", is_staff=True)
    if perms:
        group, _ = Group.objects.get_or_create(name=f"perm-{'-'.join(perms)}")
        group.permissions.set(Permission.objects.filter(codename__in=perms, content_type__app_label="retirements"))
        user.groups.add(group)
    return user


ALL_PERMS = (
    "request_retirement",
    "hold_retirementrequest",
    "cancel_retirementrequest",
    "resume_retirementrequest",
    "retry_notices_retirementrequest",
)


@pytest.fixture
def hq(db) -> User:
    return make_staff("hq-alice", *ALL_PERMS)


@pytest.fixture
def other_staff(db) -> User:
    return make_staff("hq-bob", *ALL_PERMS)


@pytest.fixture
def make_workspace(db):
    def make(slug: str = "acme-old", *, lifecycle: str = Lifecycle.DISABLED, activated: bool = True, **kw: Any):
        return Workspace.objects.create(
            slug=slug,
            name=slug.title(),
            lifecycle=lifecycle,
            activated_at=clock.now() if activated else None,
            created_at=clock.now(),
            **kw,
        )

    return make
