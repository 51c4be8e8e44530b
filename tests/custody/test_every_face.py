"""Every face x every role: a marker target planted in a finished case, and each face read as each
role. Support (and staff in no group) never meet the full target or the target's evidence; the
others see both. The rule lives once (`core.access.Lens`, where a case becomes data); this walks
the faces that show it: the admin's case page, list and CSV, the API's detail and list, the
command's text and JSON, the proof, and the notification bodies."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core import mail
from django.test import Client
from django.urls import reverse

from core import access, clock, tokens
from core.authority import named
from deletions import worker
from deletions.models import StageHistory
from deletions.services import deletion_approve, deletion_submit
from ops import notify

pytestmark = pytest.mark.django_db

MARKER = "demo:zzmarker7731"
MASKED = access.mask(MARKER)
ROLES = {  # role -> staff group (None: a superuser)
    "support": "support (read-only)",
    "operator": "operators",
    "approver": "approvers",
    "auditor": "auditors",
    "superuser": None,
}
SEES = {role: access.sees({role}, access.TARGETS) for role in ROLES}


def person(role: str) -> User:
    if ROLES[role] is None:
        return User.objects.create_superuser(f"{role}-9", f"{role}-9@hq.example", "pw-for-tests")
    u = User.objects.create_user(f"{role}-9", email=f"{role}-9@hq.example", is_staff=True)
    u.groups.add(Group.objects.get(name=ROLES[role]))
    return u


@pytest.fixture
def finished() -> Any:
    req = deletion_submit(target=MARKER, actor=named("operator-a"), reason="ticket 4410")
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    worker.run(req.id, executor_id="worker-a")
    req.refresh_from_db()
    assert req.status == "completed"
    # The planted marker is in the saved rows the faces read: the stages' inputs and the evidence.
    stages = list(StageHistory.objects.filter(request=req))
    assert any(MARKER in json.dumps(s.metadata_json) for s in stages)
    assert any(s.metadata_json.get("result") for s in stages)
    return req


def faces(user: User, req: Any, cmd: Any) -> dict[str, str]:
    """What each face shows `user` of the case, as text."""
    web = Client()
    web.force_login(user)
    admin = "admin:deletions_deletionrequest"
    token = tokens.issue(user, name="faces", scope="read")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    shown = {
        "case page": web.get(reverse(f"{admin}_change", args=[req.id])),
        "list": web.get(reverse(f"{admin}_changelist")),
        "csv": web.get(reverse(f"{admin}_export")),
        "proof": web.get(reverse(f"{admin}_proof", args=[req.id])),
        "api detail": api.get(f"/api/v1/deletions/{req.id}"),
        "api list": api.get("/api/v1/deletions"),
        "inbox": web.get(reverse("inbox")),
    }
    out = {face: r.content.decode() for face, r in shown.items()}
    for face in ("case page", "list", "csv", "api detail", "api list", "inbox"):
        assert shown[face].status_code == 200, (face, shown[face].status_code)
    out["command text"] = cmd("show_deletion", str(req.id), "--by", user.username).out
    out["command json"] = cmd("show_deletion", str(req.id), "--json", "--by", user.username).out
    for face in ("api detail", "api list", "command json"):
        out[face] = json.dumps(json.loads(out[face]), ensure_ascii=False)
    return out


@pytest.mark.parametrize("role", list(ROLES))
def test_each_face_shows_each_role_what_the_access_table_says(role, finished, cmd) -> None:
    user = person(role)
    shown = faces(user, finished, cmd)
    for face, text in shown.items():
        if face == "proof":
            continue
        if face == "inbox":  # a finished case waits on nobody: the inbox's own test reads its rows
            assert MARKER not in text
        elif SEES[role]:
            assert MARKER in text, face
        else:
            assert MARKER not in text, face
            assert MASKED in text, face
    detail = json.loads(shown["api detail"])
    command = json.loads(shown["command json"])
    for data in (detail, command):
        evidence = [s["evidence"] for s in data["stages"]] + [s["metadata_json"].get("result") for s in data["stages"]]
        if access.sees({role}, access.EVIDENCE):
            assert any(evidence), role
        else:
            assert not any(evidence), role
            assert all(s["metadata_json"].get("inputs") for s in data["stages"] if s["stage"] != "completed")
    # The proof: approvers, auditors and superusers only; it names the target in full.
    if access.sees({role}, access.PROOF):
        assert MARKER in shown["proof"]
    else:
        assert MARKER not in shown["proof"]


def test_notification_bodies_never_carry_the_full_target(finished) -> None:
    waiting = deletion_submit(target=MARKER.replace("7731", "7732"), actor=named("operator-a"))
    notify.tick(clock.now())
    bodies = [f"{m.subject} {m.body}" for m in mail.outbox]
    assert bodies, "the approval waiting was told to somebody"
    assert all(waiting.target not in b and MARKER not in b for b in bodies)
    assert any(access.mask(waiting.target) in b for b in bodies)
