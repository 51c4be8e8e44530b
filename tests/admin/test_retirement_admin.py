"""Retirement admin: request, hold, release, cancel, resume with permissions checked on the server."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse

from core import clock, present
from core.authority import Actor, named
from retirements.models import Lifecycle, RetirementRequest, Workspace
from retirements.services import retirement_request
from tests.retirements.conftest import retirement_rows

pytestmark = pytest.mark.django_db


def url(name: str, req: RetirementRequest) -> str:
    return reverse(f"admin:retirements_retirementrequest_{name}", args=[req.pk])


@pytest.fixture
def workspace(staff) -> Workspace:
    return Workspace.objects.create(
        slug="globex-old", name="Globex", lifecycle=Lifecycle.DISABLED, activated_at=clock.now(), created_at=clock.now()
    )


@pytest.fixture
def waiting(staff, workspace) -> RetirementRequest:
    return retirement_request(
        actor=Actor.of(staff["operator"]), slug="globex-old", reason="contract ended", confirmation="globex-old"
    )


def test_operator_requests_retirement_through_the_form(login, workspace) -> None:
    client = login("operator")
    listing = client.get(reverse("admin:retirements_workspace_changelist"))
    assert b"request retirement" in listing.content
    target = reverse("admin:retirements_workspace_request_retirement", args=[workspace.pk])
    wrong = client.post(target, {"reason": "merged into acme (OPS-12)", "confirmation": "globex"}, follow=True)
    assert any("confirmation does not match slug" in str(m) for m in wrong.context["messages"])
    assert not RetirementRequest.objects.exists()
    # The form comes back with what was typed and the refusal beside it: nothing to type again.
    page = wrong.content.decode()
    assert wrong.status_code == 200 and "merged into acme (OPS-12)" in page and 'value="globex"' in page
    assert "confirmation does not match slug" in page
    done = client.post(target, {"reason": "contract ended", "confirmation": "globex-old"})
    req = RetirementRequest.objects.get()
    assert req.requested_by.username == "operator-1" and req.workspace.lifecycle == "deletion_pending"
    assert done.status_code == 302 and done["Location"] == url("change", req)  # lands on the new case
    # The workspace list links to it.
    listing = client.get(reverse("admin:retirements_workspace_changelist")).content.decode()
    assert f'<a href="{url("change", req)}">retirement (waiting period)</a>' in listing
    page = client.get(reverse("admin:retirements_workspace_change", args=[workspace.pk])).content.decode()
    assert f'<a href="{url("change", req)}">retirement (waiting period)</a>' in page  # and so does its page
    assert "no legal hold" in page and "regular" in page


@pytest.mark.parametrize("who", ["support", "approver", "plain"])
def test_request_retirement_is_forbidden_without_permission(login, workspace, who) -> None:
    target = reverse("admin:retirements_workspace_request_retirement", args=[workspace.pk])
    before = retirement_rows()
    assert login(who).post(target, {"reason": "x", "confirmation": "globex-old"}).status_code == 403
    assert retirement_rows() == before


def test_hold_and_release_from_the_case_page(login, waiting) -> None:
    client = login("operator")
    page = client.get(url("change", waiting)).content.decode()
    assert '<a class="button" id="action-hold"' in page and 'id="timeline"' in page and "request received" in page
    response = client.post(url("hold", waiting), {"reason": "owner disputes"}, follow=True)
    assert "Retirement held." in [str(m) for m in response.context["messages"]]
    assert "on hold: owner disputes" in response.content.decode()
    again = client.post(url("hold", waiting), {"reason": "again"}, follow=True)
    assert any("already held by operator-1" in str(m) for m in again.context["messages"])
    with time_machine.travel(clock.now() + timedelta(days=3), tick=False):
        client = login("operator")  # a session lasts 8 hours: three days on, they log in again
        client.post(url("release", waiting), {"reason": "owner agreed"})
    req = RetirementRequest.objects.get(id=waiting.id)
    assert req.status == "waiting" and req.eligible_at >= waiting.eligible_at + timedelta(days=3)
    assert list(req.decisions.order_by("id").values_list("actor_label", "action")) == [
        ("operator-1", "request"),
        ("operator-1", "hold"),
        ("operator-1", "release"),
    ]


def test_cancel_and_resume_from_the_case_page(login, waiting) -> None:
    client = login("operator")
    with time_machine.travel(clock.now() + timedelta(minutes=20), tick=False):
        client.post(url("resume", waiting), {"reason": "watcher never started"})
    assert RetirementRequest.objects.get(id=waiting.id).watcher_id != waiting.watcher_id
    client.post(url("cancel", waiting), {"reason": "sold instead"})
    req = RetirementRequest.objects.get(id=waiting.id)
    assert req.status == "cancelled" and req.workspace.lifecycle == "disabled"
    after = client.post(url("cancel", waiting), {"reason": "again"}, follow=True)
    assert any("already cancelled" in str(m) for m in after.context["messages"])


@pytest.mark.parametrize(
    ("who", "action", "data"),
    [
        ("support", "hold", {"reason": "x"}),
        ("approver", "hold", {"reason": "x"}),
        ("support", "release", {"reason": "x"}),
        ("support", "cancel", {"reason": "x"}),
        ("approver", "cancel", {"reason": "x"}),
        ("support", "resume", {}),
        ("plain", "resume", {}),
    ],
)
def test_hand_crafted_posts_without_permission_are_forbidden(login, waiting, who, action, data) -> None:
    before = retirement_rows()
    assert login(who).post(url(action, waiting), data).status_code == 403
    assert retirement_rows() == before


def test_support_reads_the_case_without_actions(login, waiting) -> None:
    page = login("support").get(url("change", waiting)).content.decode()
    assert "Retire workspace globex-old" in page and "Responsible person" in page
    assert '<a class="button" id="action-' not in page


def test_operations_overview_lists_what_waits_on_people(login, waiting, staff) -> None:
    from deletions.services import deletion_submit

    deletion_submit(target="demo:alice", actor=named("operator-1"))
    from retirements.services import retirement_hold

    retirement_hold(actor=Actor.of(staff["operator"]), request_id=waiting.id, reason="legal review")
    index = login("support").get(reverse("admin:index"))
    assert reverse("operations").encode() in index.content
    page = login("support").get(reverse("operations")).content.decode()
    # Support sees the target masked (core.access).
    assert "deletion demo:al…ce" in page and "demo:alice" not in page and "waiting for approval" in page
    # The responsible person for an approval is an approver from the rota, never the submitter.
    row = next(line for line in page.splitlines() if "deletion demo:al…ce" in line)
    assert "approver-1 (backup: approver-2)" in row and "operator-1" not in row
    assert "retirement globex-old" in page and "on hold: legal review" in page


def test_a_workspace_name_with_control_characters_is_refused_in_the_admin(client) -> None:
    from django.contrib.auth.models import User

    from retirements.models import Workspace

    ws = Workspace.objects.create(slug="ansi-ws", name="Plain", lifecycle="active", created_at=clock.now())
    client.force_login(User.objects.create_superuser("root-1", "root@hq.example", "pw"))
    page = client.post(
        f"/admin/retirements/workspace/{ws.pk}/change/",
        {"name": "\x1b[31mred\x1b[0m", "legal_hold": "", "protected_reason": ""},
    )
    assert page.status_code == 200 and "printable characters" in page.content.decode()
    assert Workspace.objects.get(pk=ws.pk).name == "Plain"


def test_the_case_page_says_why_each_notice_moved(login, staff, waiting, cmd) -> None:
    """Held past the reminder's time and released: the reminder is suppressed and the final warning
    re-planned, each slot keeping why (written with the move); the notice list, the timeline and
    show_retirement say it, and a cancellation's suppressions say theirs."""
    from retirements.services import retirement_cancel, retirement_hold, retirement_release
    from retirements.watcher import run_due

    start = waiting.requested_at
    operator = Actor.of(staff["operator"])
    with time_machine.travel(start, tick=False):
        run_due(now=clock.now())
    with time_machine.travel(start + timedelta(days=23, hours=1), tick=False):
        retirement_hold(actor=operator, request_id=waiting.id, reason="legal review")
    with time_machine.travel(start + timedelta(days=30), tick=False):
        retirement_release(actor=operator, request_id=waiting.id, reason="review done")
    why = dict(waiting.notices.values_list("kind", "moved_because"))
    moved = (
        f"re-planned on release after 6 d 23 h on hold: eligibility moved from "
        f"{present.absolute(start + timedelta(days=30))} to {present.absolute(start + timedelta(days=37, hours=-1))}"
    )
    assert why == {
        "request_received": "",
        "reminder_7_days": "suppressed on release: eligibility is 6 d 23 h away, less than the reminder's 7-day lead",
        "final_warning": moved,
        "held": "",
        "released": "",
    }
    page = login("operator").get(url("change", waiting)).content.decode()
    notices = page.split('id="notices"')[1].split("</table>")[0]
    assert '<th scope="col">Why it moved</th>' in notices
    assert f"<td>{moved}</td>" in notices and "less than the reminder&#x27;s 7-day lead</td>" in notices
    assert f"· {moved}</title>" in page  # the timeline's notice mark says it too
    shown = cmd("show_retirement", str(waiting.id))
    assert shown.code == 0 and f"moved: {moved}" in shown.out

    with time_machine.travel(start + timedelta(days=31), tick=False):
        retirement_cancel(actor=operator, request_id=waiting.id, reason="sold instead")
    final = waiting.notices.get(kind="final_warning")
    assert (final.status, final.moved_because) == ("suppressed", "suppressed: cancelled by operator-1: sold instead")


def test_the_alarm_of_a_late_purge_executor_is_closed_from_the_case_page(login, staff) -> None:
    """A late purge executor was rejected on a case that then completed: its alarm is on the page,
    Close alarm is offered to an operator (refused to support), and closing it with what they found
    saves their decision, which the alarm names; then Close alarm says there is nothing to close."""
    from retirements import policy, purge
    from retirements.models import Alarm, Decision, PurgeJob
    from tests.retirements.helpers import executing

    def make_workspace(slug: str, **kw: object) -> Workspace:
        return Workspace.objects.create(
            slug=slug, name="Initech", lifecycle=Lifecycle.DISABLED, activated_at=None, created_at=clock.now()
        )

    req, job = executing(staff["operator"], make_workspace, "initech-old")
    assert purge.run_purge(job.id, now=clock.now()).endswith("done")
    late = PurgeJob.objects.get(id=job.id).lease_generation - 1
    assert "rejected: stale executor" in purge.apply(job.id, owner="late", generation=late, now=clock.now())

    page = login("operator").get(url("change", req)).content.decode()
    assert "Alarm (purge stale executor): a late purge executor was rejected" in page
    assert '<a class="button" id="action-close-alarm"' in page
    support = login("support")
    assert '<a class="button" id="action-close-alarm"' not in support.get(url("change", req)).content.decode()
    before = retirement_rows()
    assert support.post(url("close_alarm", req), {"kind": "purge_stale_executor", "reason": "x"}).status_code == 403
    assert retirement_rows() == before

    client = login("operator")
    form = client.get(url("close_alarm", req)).content.decode()
    assert 'name="kind"' in form and 'name="reason"' in form
    empty = client.post(url("close_alarm", req), {"kind": "purge_stale_executor", "reason": ""})
    assert empty.status_code == 200 and retirement_rows() == before  # the form again, nothing written
    done = client.post(
        url("close_alarm", req), {"kind": "purge_stale_executor", "reason": "host paused by a snapshot"}, follow=True
    )
    assert "Alarm closed; your decision is on the case." in [str(m) for m in done.context["messages"]]
    alarm = Alarm.objects.get(request=req, kind="purge_stale_executor")
    decision = Decision.objects.get(request=req, action="close_alarm")
    assert (alarm.decision_id, alarm.resolved_at, decision.actor_label, decision.reason) == (
        decision.id, decision.created_at, "operator-1", "purge_stale_executor: host paused by a snapshot",
    )  # fmt: skip
    after = done.content.decode()
    assert "Alarm (purge stale executor)" not in after
    assert '<span class="button disabled" id="action-close-alarm"' in after and policy.NOTHING_TO_CLOSE in after
