from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from core import tokens
from ops.groups import ensure_groups

ROLES = {
    "operator": "operators",
    "approver": "approvers",
    "support": "support (read-only)",
    "intake": "intake",
    "none": None,  # active staff in no group: may do nothing
}


@dataclass
class Answer:
    status: int
    data: Any
    headers: Any


@pytest.fixture
def staff(db) -> dict[str, User]:
    ensure_groups(Group, Permission)
    people = {}
    for role, group in ROLES.items():
        user = User.objects.create_user(
            f"{role}-1", email=f"{role}-1@hq.example", password="pw-for-tests", is_staff=True
        )
        if group:
            user.groups.add(Group.objects.get(name=group))
        people[role] = user
    people["approver2"] = User.objects.create_user("approver-2", password="pw-for-tests", is_staff=True)
    people["approver2"].groups.add(Group.objects.get(name="approvers"))
    return people


@pytest.fixture
def token(staff) -> Any:
    made: dict[tuple[str, str], str] = {}

    def of(who: str, scope: str = "decide") -> str:
        if (who, scope) not in made:
            made[(who, scope)] = tokens.issue(staff[who], name=f"{who} {scope}", scope=scope)
        return made[(who, scope)]

    return of


@pytest.fixture
def api(token) -> Any:
    def call(
        who: str | None,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | str | None = None,
        scope: str = "decide",
        headers: dict[str, str] | None = None,
    ) -> Answer:
        client = Client()
        extra: dict[str, Any] = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in (headers or {}).items()}
        if who is not None:
            extra["HTTP_AUTHORIZATION"] = f"Bearer {token(who, scope)}"
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        if method == "GET":
            response = client.get(path, **extra)
        else:
            response = client.generic(method, path, data or "", content_type="application/json", **extra)
        try:
            parsed = response.json()
        except ValueError:
            parsed = response.content
        return Answer(response.status_code, parsed, response)

    return call
