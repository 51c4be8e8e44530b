"""One story per case, from one place: for each situation a case is in, every face (the case page,
the admin list, `show_*` as text and JSON, the API's detail, the inbox and the operations overview)
says the status words, the open question, who acts next, the next check and the deadline that the
one function gives from the saved rows (`deletions.reading.story_of`, `retirements.selectors.story`).

The worker is a real process, killed with SIGKILL right after it saved "submitted" for its stage
(or right after its claim); time is then moved to read the same rows 5 s, 40 s (three heartbeats of
10 s missed, the lease of 60 s still running) and 61 s (the lease lapsed) later."""

from __future__ import annotations

import html
import json
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from core import clock, present, tokens
from core.authority import Actor, named
from core.present import Story
from deletions import reading, worker
from deletions.models import DeletionRequest
from deletions.services import deletion_approve, deletion_cancel, deletion_name_by_rota, deletion_submit
from retirements import selectors as retirement_selectors
from retirements.models import RetirementRequest
from retirements.services import retirement_hold
from tests.deletions.helpers import crash_at

pytestmark = pytest.mark.django_db(transaction=True)


def staff(username: str, group: str | None) -> User:
    if group is None:
        return User.objects.create_superuser(username, f"{username}@hq.example", "pw-for-tests")
    user = User.objects.create_user(username, email=f"{username}@hq.example", is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


@pytest.fixture
def staff_of(settings, people) -> dict[str, User]:
    settings.DELETION_HEARTBEAT_SECONDS = 10  # as the demo's: a lease of 60 s, a beat every 10 s
    return {
        "lead": staff("lead-9", None),
        "approver": staff("approver-8", "approvers"),  # approvers only: named first for approvals
        "approver-backup": staff("approver-9", "approvers"),
        "on call": staff("oncall-9", "operators"),  # operators only: the operators on call's rota
    }


def page_text(user: User, url: str) -> str:
    web = Client()
    web.force_login(user)
    shown = web.get(url)
    assert shown.status_code == 200, (url, shown.status_code)
    return html.unescape(shown.content.decode())


def api_detail(user: User, path: str) -> dict[str, Any]:
    api = Client(HTTP_AUTHORIZATION=f"Bearer {tokens.issue(user, name='story', scope='read')}")
    answer = api.get(path)
    assert answer.status_code == 200, answer.content
    return json.loads(answer.content)


def at(value: Any) -> str:
    return "-" if value is None else present.absolute(value)


def inbox_row(user: User, case_id: Any) -> str:
    """The inbox row of one case as `user` sees it ("" when it is not in their inbox)."""
    page = page_text(user, reverse("inbox"))
    rows = page.split('id="inbox"')[1].split("</table>")[0].split("<tr>")
    return next((r for r in rows if str(case_id) in r), "")


def said_everywhere(told: Story, text: str, face: str) -> None:
    """The story's words and times as a face shows them."""
    assert told.status_words in text, (face, told.status_words)
    if told.question:
        assert told.question in text, (face, told.question)
    assert told.owner in text, (face, told.owner)
    assert at(told.next_check_at) in text, (face, told.next_check_at)
    if told.deadline:
        assert told.deadline in text, (face, told.deadline)


def deletion_faces(req_id: Any, staff_of: dict[str, User], cmd: Any) -> Story:
    """Walk every face of a deletion case at the clock's now; return its story."""
    now = clock.now()
    req = DeletionRequest.objects.select_related("assignee", "backup").get(id=req_id)
    told = reading.story_of(req, now)
    lead = staff_of["lead"]
    said_everywhere(told, page_text(lead, reverse("admin:deletions_deletionrequest_change", args=[req.id])), "page")
    text = cmd("show_deletion", str(req.id))
    assert text.code == 0, text.err
    said_everywhere(told, text.out, "show_deletion")
    for face, data in (
        ("show_deletion --json", json.loads(cmd("show_deletion", str(req.id), "--json").out)),
        ("api", api_detail(lead, f"/api/v1/deletions/{req.id}")),
    ):
        assert data["story"] == told.as_json(), face
        assert data["request"]["next_check_at"] == told.as_json()["next_check_at"], face  # never a stale column
        assert data["request"]["open_question"] == (told.question or ""), face
    listed = page_text(lead, reverse("admin:deletions_deletionrequest_changelist"))
    row = next(r for r in listed.split("<tr") if str(req.id) in r)
    assert (told.person or told.owner) in row and at(told.next_check_at) in row
    if told.closed:
        assert told.status_words in row and " of about " not in row  # its outcome, never "5 of about 5"
    # The inbox: exactly those the story says it waits on, in the story's words.
    for who in ("approver", "approver-backup", "on call"):
        user = staff_of[who]
        waits = told.waits_on(user.username, [g for g in ("approvers", "operators on call") if on_rota(user, g)])
        inboxed = inbox_row(user, req.id)
        assert bool(inboxed) is bool(waits), (who, told)
        if inboxed:
            said_everywhere(told, inboxed, f"inbox of {who}")
    # The overview lists an unknown effect with the same words.
    overview = page_text(lead, reverse("operations"))
    unknown = overview.split('id="effect-unknown"')[1].split("</table>")[0]
    assert (str(req.id) in unknown) is (told.status_words == "effect unknown")
    if told.status_words == "effect unknown":
        assert told.question in unknown and told.owner in unknown and at(told.next_check_at) in unknown
    return told


def on_rota(user: User, rota: str) -> bool:
    return user.groups.filter(name={"approvers": "approvers", "operators on call": "operators"}[rota]).exists()


def approved_case(target: str) -> DeletionRequest:
    req = deletion_submit(target=target, actor=named("operator-a"))
    deletion_name_by_rota()  # the approvers' rota names a person and a backup for the approval
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    return DeletionRequest.objects.get(id=req.id)


def test_a_worker_killed_after_submitting_tells_one_story_on_every_face(staff_of, cmd) -> None:
    req = approved_case("demo:story-killed")
    assert req.assignee is not None and req.assignee.username == "approver-8"  # named for the approval, stale now
    with time_machine.travel(clock.now(), tick=False):  # "queued … (for 3 s)": one instant for every face
        queued = deletion_faces(req.id, staff_of, cmd)
    assert queued.status_words == "queued for a free worker" and queued.rota is None

    crashed = crash_at("after-submit-mark", req.id)  # a real worker, SIGKILLed right after it submitted
    beat, lapse = crashed.heartbeat_at, crashed.lease_expires_at
    assert beat is not None and lapse is not None
    saved = crashed.next_check_at
    assert crashed.status == "running" and saved is not None and saved < beat  # the saved next check is past

    url = reverse("admin:deletions_deletionrequest_change", args=[req.id])
    with time_machine.travel(beat + timedelta(seconds=5), tick=False):
        live = deletion_faces(req.id, staff_of, cmd)
        assert "no report: effect unknown" not in page_text(staff_of["lead"], url)  # its attempt is running
    assert live.status_words == "running" and live.owner.startswith("the system (worker-a")
    assert live.next_check_at == crashed.lease_expires_at and live.rota is None

    with time_machine.travel(beat + timedelta(seconds=40), tick=False):  # three heartbeats missed
        silent = deletion_faces(req.id, staff_of, cmd)
        assert inbox_row(staff_of["on call"], req.id) and not inbox_row(staff_of["approver"], req.id)
        assert "no report: effect unknown" in page_text(staff_of["lead"], url)  # the attempt, as the panel
    assert silent.status_words == "effect unknown" and silent.rota == "operators on call"
    assert silent.question.startswith(f"not reporting since {present.absolute(beat)}: ")
    assert silent.next_check_at == crashed.lease_expires_at

    with time_machine.travel(lapse + timedelta(seconds=1), tick=False):
        lapsed = deletion_faces(req.id, staff_of, cmd)
    assert lapsed.status_words == "effect unknown" and lapsed.owner.startswith("operators on call (group)")


def test_a_worker_silent_before_it_submitted_is_not_reporting_and_the_systems(staff_of, cmd) -> None:
    req = approved_case("demo:story-silent")
    crashed = crash_at("after-claim", req.id)
    assert crashed.heartbeat_at is not None
    with time_machine.travel(crashed.heartbeat_at + timedelta(seconds=31), tick=False):
        told = deletion_faces(req.id, staff_of, cmd)
    since = present.absolute(crashed.heartbeat_at)
    assert told.status_words == f"running, worker not reporting since {since}"
    assert told.question.startswith(f"not reporting since {since}: ") and told.rota is None


def test_a_manual_case_a_cancelled_and_a_completed_case_tell_one_story(staff_of, cmd) -> None:
    manual = approved_case("manual:vendor-crm/story@example.com")
    worker.run(manual.id, executor_id="worker-a")  # handed to a person
    with time_machine.travel(clock.now(), tick=False):
        told = deletion_faces(manual.id, staff_of, cmd)
    assert told.status == "needs_attention" and told.status_words == "needing attention"
    assert "by hand in a vendor's console" in told.question and "look" not in told.question
    page = page_text(staff_of["lead"], reverse("admin:deletions_deletionrequest_change", args=[manual.id]))
    assert "effect unknown" not in page and "no stage's effect is in question" not in page

    cancelled = deletion_submit(target="demo:story-cancelled", actor=named("operator-a"))
    deletion_cancel(actor=named("operator-b"), request_id=cancelled.id, reason="withdrawn")
    with time_machine.travel(clock.now(), tick=False):
        told = deletion_faces(cancelled.id, staff_of, cmd)
    assert told.status_words == "cancelled: nothing deleted" and "met" not in told.deadline

    done = approved_case("demo:story-done")
    worker.run(done.id, executor_id="worker-a")
    with time_machine.travel(clock.now(), tick=False):
        told = deletion_faces(done.id, staff_of, cmd)
    assert told.status_words == "completed" and told.closed and told.next_check_at is None


def test_a_held_retirement_tells_one_story_on_every_face(staff_of, cmd) -> None:
    assert cmd("create_workspace", "--slug", "story-ws", "--name", "S", "--disabled").code == 0
    ran = cmd("request_retirement", "--workspace", "story-ws", "--requested-by", "operator-a", "--reason", "closed",
              "--confirm", "story-ws")  # fmt: skip
    assert ran.code == 0, ran.err
    req = RetirementRequest.objects.get(workspace__slug="story-ws")
    retirement_hold(actor=Actor.of(User.objects.get(username="operator-a")), request_id=req.id, reason="legal")
    req = RetirementRequest.objects.select_related("workspace", "owner", "backup", "watcher").get(id=req.id)
    told = retirement_selectors.story(req, clock.now())
    assert told.status_words == "on hold" and told.next_check_at is not None and told.deadline.startswith("hold review")
    lead = staff_of["lead"]
    said_everywhere(told, page_text(lead, reverse("admin:retirements_retirementrequest_change", args=[req.id])), "page")
    text = cmd("show_retirement", str(req.id))
    assert text.code == 0, text.err
    said_everywhere(told, text.out, "show_retirement")
    assert json.loads(cmd("show_retirement", str(req.id), "--json").out)["story"] == told.as_json()
    assert api_detail(lead, f"/api/v1/retirements/{req.id}")["story"] == told.as_json()
    owner = User.objects.get(username=told.person)
    said_everywhere(told, inbox_row(owner, req.id), "inbox")


def test_take_is_not_offered_to_one_who_could_not_then_record_the_effect(staff_of) -> None:
    """A manual case waits for an operator on call to record the effect; its submitter is on that
    rota but may not record it (four eyes): no Take for them, and why; another operator may take it."""
    submitter = User.objects.get(username="operator-a")
    manual = approved_case("manual:vendor-crm/take@example.com")
    worker.run(manual.id, executor_id="worker-a")
    url = reverse("admin:deletions_deletionrequest_change", args=[manual.id])
    theirs = page_text(submitter, url)
    assert '<a class="button" id="action-take"' not in theirs
    assert "you could not then record effect applied by hand: four eyes: operator-a submitted" in theirs
    other = page_text(User.objects.get(username="operator-c"), url)
    assert '<a class="button" id="action-take"' in other and '<a class="button" id="action-record"' in other
