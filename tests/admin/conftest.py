from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from ops.groups import ensure_groups


def member(username: str, group: str | None) -> User:
    user = User.objects.create_user(username, email=f"{username}@hq.example", password="pw-for-tests", is_staff=True)
    if group:
        user.groups.add(Group.objects.get(name=group))
    return user


@pytest.fixture
def staff(db) -> dict[str, User]:
    ensure_groups(Group, Permission)
    return {
        "operator": member("operator-1", "operators"),
        "approver": member("approver-1", "approvers"),
        "approver2": member("approver-2", "approvers"),
        "support": member("support-1", "support (read-only)"),
        "plain": member("plain-1", None),
    }


@pytest.fixture
def login(client: Client, staff):
    def as_(who: str) -> Client:
        client.force_login(staff[who])
        return client

    return as_


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []
