"""Deletion admin: every action allowed with its permission, refused without, nothing changed."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django_q.models import OrmQ

from core.authority import named
from deletions.models import DeletionRequest, Status
from deletions.services import deletion_approve, deletion_submit
from tests.deletions.helpers import all_rows
from tests.support import force

pytestmark = pytest.mark.django_db


def url(name: str, req: DeletionRequest) -> str:
    return reverse(f"admin:deletions_deletionrequest_{name}", args=[req.pk])


@pytest.fixture
def submitted(staff) -> DeletionRequest:
    return deletion_submit(target="demo:alice", actor=named("operator-1"))


@pytest.fixture
def approved(submitted) -> DeletionRequest:
    deletion_approve(request_id=submitted.id, actor=named("approver-1"), digest=submitted.inventory_digest)
    return DeletionRequest.objects.get(id=submitted.id)


def test_anonymous_is_sent_to_login(client, submitted) -> None:
    response = client.get(url("change", submitted))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_non_staff_cannot_open_the_admin(client, staff, submitted) -> None:
    staff["plain"].is_staff = False
    staff["plain"].save()
    client.force_login(staff["plain"])
    assert client.get(url("change", submitted)).status_code == 302


def test_support_reads_list_and_case_but_sees_no_actions(login, submitted) -> None:
    client = login("support")
    masked = "demo:al…ce".encode()  # support sees targets masked (core.access)
    listing = client.get(reverse("admin:deletions_deletionrequest_changelist"), {"q": "demo:al…ce"})
    assert listing.status_code == 200 and masked in listing.content and b"demo:alice" not in listing.content
    # The person's name is no search key for a masked reader: it finds nothing, as a wrong guess does.
    guessed = client.get(reverse("admin:deletions_deletionrequest_changelist"), {"q": "alice"})
    assert guessed.status_code == 200 and masked not in guessed.content
    by_id = client.get(reverse("admin:deletions_deletionrequest_changelist"), {"q": str(submitted.id)})
    assert masked in by_id.content
    filtered = client.get(reverse("admin:deletions_deletionrequest_changelist"), {"status__exact": "completed"})
    assert masked not in filtered.content
    page = client.get(url("change", submitted))
    assert page.status_code == 200
    body = page.content.decode()
    assert "What is being changed" in body and "waiting for an approver (not the submitter) to approve" in body
    assert "Responsible person" in body and "operator-1" in body
    # Support may only reveal the masked target (recorded); nothing else is offered without the permission.
    assert body.count('<a class="button" id="action-') == 1 and 'id="action-reveal"' in body
    assert "only staff allowed to approve deletion requests can do this" in body  # shown disabled, with the reason


def test_approver_approves_through_the_confirmation_page(login, submitted) -> None:
    client = login("approver")
    page = client.get(url("approve", submitted))
    assert page.status_code == 200
    assert submitted.inventory_digest in page.content.decode()
    assert b"00000000-0000-0000-0000-00000000000b" in page.content
    response = client.post(
        url("approve", submitted), {"inventory_digest": submitted.inventory_digest, "confirm": "on"}, follow=True
    )
    assert "Approved the deletion of demo:alice." in [str(m) for m in response.context["messages"]]
    req = DeletionRequest.objects.get(id=submitted.id)
    assert req.status == Status.APPROVED
    assert list(req.approvals.values_list("approved_by", flat=True)) == ["approver-1"]
    assert list(req.decisions.values_list("actor_label", "action")) == [
        ("operator-1", "submit"),
        ("approver-1", "approve"),
    ]


def test_four_eyes_the_requester_cannot_approve(login, staff) -> None:
    staff["approver"].groups.add(Group.objects.get(name="operators"))  # may submit and approve, not both
    mine = deletion_submit(target="demo:own", actor=named("approver-1"))
    client = login("approver")
    page = client.get(url("change", mine))
    assert b"you submitted this request: an approver (not you) must approve it" in page.content
    assert b'<a class="button" id="action-approve"' not in page.content
    before = all_rows()
    response = client.post(
        url("approve", mine), {"inventory_digest": mine.inventory_digest, "confirm": "on"}, follow=True
    )
    assert response.status_code == 200
    assert any("four eyes: approver-1 submitted request" in str(m) for m in response.context["messages"])
    assert all_rows() == before
    other = login("approver2").post(url("approve", mine), {"inventory_digest": mine.inventory_digest, "confirm": "on"})
    assert other.status_code == 302
    assert DeletionRequest.objects.get(id=mine.id).status == Status.APPROVED


def test_stale_digest_is_refused_with_both_digests(login, submitted) -> None:
    response = login("approver").post(
        url("approve", submitted), {"inventory_digest": "f" * 64, "confirm": "on"}, follow=True
    )
    messages = [str(m) for m in response.context["messages"]]
    assert any(f"does not match inventory {submitted.inventory_digest}" in m for m in messages)
    assert DeletionRequest.objects.get(id=submitted.id).status == Status.SUBMITTED


def test_an_approver_may_cancel_a_case_that_waits_on_the_approvers(login, submitted) -> None:
    login("approver").post(url("cancel", submitted), {"reason": "the requester withdrew (DSR-88)"})
    req = DeletionRequest.objects.get(id=submitted.id)
    assert req.status == Status.CANCELLED
    assert req.decisions.filter(action="cancel", actor_label="approver-1", reason__contains="DSR-88").exists()


def test_the_approval_page_shows_the_submitters_reason(login, submitted) -> None:
    assert "(no reason given)" in login("approver").get(url("approve", submitted)).content.decode()
    req = deletion_submit(target="demo:bob", actor=named("operator-1"), reason="GDPR erasure, ticket DSR-88")
    page = login("approver").get(url("approve", req)).content.decode()
    assert '<q id="submit-reason">GDPR erasure, ticket DSR-88</q>' in page


@pytest.mark.parametrize(
    ("who", "action", "data"),
    [
        ("operator", "approve", {"confirm": "on"}),  # operators cannot approve
        ("support", "approve", {"confirm": "on"}),
        ("support", "cancel", {"reason": "x"}),
        ("support", "run", {"reason": "x"}),
        ("approver", "run", {"reason": "x"}),
        ("support", "resume", {"reason": "x"}),
        ("plain", "cancel", {"reason": "x"}),
    ],
)
def test_hand_crafted_posts_without_permission_are_forbidden(login, submitted, who, action, data) -> None:
    data = {"inventory_digest": submitted.inventory_digest, **data}
    before = all_rows()
    response = login(who).post(url(action, submitted), data)
    assert response.status_code == 403
    assert login(who).get(url(action, submitted)).status_code == 403
    assert all_rows() == before


def test_operator_cancels_with_a_reason(login, submitted) -> None:
    client = login("operator")
    missing = client.post(url("cancel", submitted), {"reason": ""})
    assert missing.status_code == 200 and b"This field is required" in missing.content
    response = client.post(url("cancel", submitted), {"reason": "customer withdrew"}, follow=True)
    assert "Cancellation of demo:alice recorded." in [str(m) for m in response.context["messages"]]
    req = DeletionRequest.objects.get(id=submitted.id)
    assert req.status == Status.CANCELLED and req.cancel_requested_by == "operator-1"
    assert req.decisions.filter(action="cancel", actor_label="operator-1", reason="customer withdrew").exists()
    again = client.post(url("cancel", submitted), {"reason": "again"}, follow=True)
    assert any("already cancelled" in str(m) for m in again.context["messages"])


def test_operator_runs_now_and_the_run_is_enqueued_on_commit(
    login, approved, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = login("operator").post(url("run", approved), {"reason": "the target is back"}, follow=True)
    assert "Run of demo:alice enqueued." in [str(m) for m in response.context["messages"]]
    assert OrmQ.objects.count() == 1
    assert approved.decisions.get(action="run_now").reason == "the target is back"
    refused = login("operator").post(
        url(
            "run",
            DeletionRequest.objects.create(
                target="demo:z",
                requested_by="x",
                inventory_json={},
                inventory_version=1,
                inventory_digest="0" * 64,
                created_at=approved.created_at,
                updated_at=approved.created_at,
                received_at=approved.created_at,
                due_at=approved.due_at,
                next_check_at=approved.created_at,
            ),
        ),
        {"reason": "try it"},
        follow=True,
    )
    assert any("only an approved, running or retrying request can run" in str(m) for m in refused.context["messages"])


def test_operator_resumes_a_request_that_needs_attention(login, approved) -> None:
    force(DeletionRequest.objects.filter(id=approved.id), status=Status.NEEDS_ATTENTION, retry_count=10)
    client = login("operator")
    assert b'<a class="button" id="action-resume"' in client.get(url("change", approved)).content
    client.post(url("resume", approved), {"reason": "target system fixed"})
    req = DeletionRequest.objects.get(id=approved.id)
    assert req.status == Status.RETRY_WAIT and req.retry_count == 0 and req.owner == "operator-1"
    assert req.decisions.filter(action="resume", reason="target system fixed").exists()


def test_run_now_that_cannot_run_says_why_and_records_nothing(login, approved, settings) -> None:
    from django.utils import timezone

    from deletions.store import leases

    leases.claim(request_id=approved.id, owner="q:host-z:4242", now=timezone.now(), lease_seconds=60)
    before = all_rows()
    response = login("operator").post(url("run", approved), {"reason": "the target is back"}, follow=True)
    messages = [str(m) for m in response.context["messages"]]
    assert any("a worker on host host-z (process 4242) holds the lease until" in m for m in messages), messages
    assert all_rows() == before and not OrmQ.objects.exists()


def test_an_approver_revokes_an_approval_through_the_admin(login, approved) -> None:
    client = login("approver")
    response = client.post(url("revoke", approved), {"reason": "the ticket was reopened"}, follow=True)
    assert "Approval of demo:alice revoked." in response.content.decode()
    after = DeletionRequest.objects.get(id=approved.id)
    assert after.status == Status.SUBMITTED and after.approvals.get().revoked_at is not None
    assert after.decisions.filter(action="revoke_approval", reason="the ticket was reopened").exists()


def test_a_revoke_keeps_its_reason_on_the_case_and_words_its_advice_by_why(login, approved) -> None:
    client = login("approver")
    client.post(url("revoke", approved), {"reason": "wrong community listed"})
    req = DeletionRequest.objects.get(id=approved.id)
    assert req.open_question.endswith("wrong community listed; approve again once that is resolved, or cancel")
    # Approved again: the revoker and the reason stay beside the approval they revoked.
    deletion_approve(request_id=req.id, actor=named("approver-1"), digest=req.inventory_digest)
    page = client.get(url("change", req)).content.decode()
    assert "approver-1: wrong community listed" in page
    client.post(url("revoke", req), {"reason": "customer withdrew (DSR-9)", "withdrawn": "on"})
    withdrawn = DeletionRequest.objects.get(id=approved.id)
    assert withdrawn.open_question.endswith("customer withdrew (DSR-9); the requester withdrew it: cancel it")
