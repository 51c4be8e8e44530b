"""The console carries every staff decision: submit, settle an unknown effect, bulk cancel,
CSV export, LogEntry for each decision, attempts that never disappear, django-q2's admin."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.admin.models import LogEntry
from django.urls import reverse
from django_q.models import Schedule

from core import clock
from core.authority import named
from deletions import worker
from deletions.handlers import RunOptions
from deletions.models import DeletionDecision, DeletionRequest, StageAttempt, Status
from deletions.services import deletion_approve, deletion_name_by_rota, deletion_submit
from ops.schedules import SCHEDULES, ensure_schedules
from tests.admin.conftest import messages_of
from tests.deletions.helpers import crash_at, take_over

pytestmark = pytest.mark.django_db


def url(name: str, req: DeletionRequest) -> str:
    return reverse(f"admin:deletions_deletionrequest_{name}", args=[req.pk])


def approved(target: str = "demo:alice") -> DeletionRequest:
    req = deletion_submit(target=target, actor=named("operator-1"))
    deletion_approve(request_id=req.id, actor=named("approver-1"), digest=req.inventory_digest)
    return DeletionRequest.objects.get(id=req.id)


# -- submit through the add view ---------------------------------------------------------------


def test_an_operator_submits_through_the_add_view_after_seeing_the_inventory(login, staff) -> None:
    client = login("operator")
    add = reverse("admin:deletions_deletionrequest_add")
    assert client.get(add).status_code == 200
    preview = client.post(add, {"target": "demo:zoe", "reason": "ticket DEL-9"})
    body = preview.content.decode()
    assert preview.status_code == 200 and DeletionRequest.objects.count() == 0  # nothing written yet
    assert "Community B (demo)" in body and "current member" in body and "former member" in body
    assert "rules version 1" in body
    digest = preview.context["proposal"].digest
    done = client.post(add, {"target": "demo:zoe", "reason": "ticket DEL-9", "confirm": digest}, follow=True)
    req = DeletionRequest.objects.get(target="demo:zoe")
    assert req.status == Status.SUBMITTED and req.requested_by == "operator-1"
    assert "Submitted the deletion of demo:zoe" in " ".join(messages_of(done))
    assert DeletionDecision.objects.get(request=req, action="submit").reason == "ticket DEL-9"
    assert LogEntry.objects.get(object_id=str(req.pk)).is_addition()


def test_submit_refuses_a_bad_target_in_one_line_and_writes_nothing(login, staff) -> None:
    client = login("operator")
    page = client.post(reverse("admin:deletions_deletionrequest_add"), {"target": "prod:alice", "reason": "x"})
    assert page.status_code == 200 and "no target system takes &#x27;prod:alice&#x27;" in page.content.decode()
    assert DeletionRequest.objects.count() == 0


def test_submit_needs_the_submit_permission(login, staff) -> None:
    page = login("support").get(reverse("admin:deletions_deletionrequest_add"))
    assert page.status_code == 403
    assert "only staff allowed to submit deletion requests can do this" in page.content.decode()


# -- every decision leaves a LogEntry ------------------------------------------------------------


def test_an_admin_decision_is_written_to_django_history(login, staff) -> None:
    req = approved()
    client = login("operator")
    client.post(url("cancel", req), {"reason": "customer withdrew"})
    entry = LogEntry.objects.get(object_id=str(req.pk))
    assert entry.user.username == "operator-1" and "customer withdrew" in entry.get_change_message()
    history = client.get(url("history", req))
    assert history.status_code == 200 and "customer withdrew" in history.content.decode()
    assert f"{entry.action_time:%Y-%m-%d %H:%M:%S} UTC" in history.content.decode()  # to the second
    assert "demo:alice" in client.get(reverse("admin:index")).content.decode()  # Recent actions


def test_a_refused_decision_writes_no_log_entry(login, staff) -> None:
    req = deletion_submit(target="demo:alice", actor=named("operator-1"))
    login("operator").post(url("approve", req), {"inventory_digest": req.inventory_digest, "confirm": "on"})
    assert DeletionRequest.objects.get(id=req.id).status == Status.SUBMITTED  # four eyes
    assert not LogEntry.objects.exists()


# -- settle an unknown effect -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_confirm_not_applied_is_offered_for_an_unknown_effect_and_lets_the_next_attempt_send(
    cmd, login, staff, settings
) -> None:
    req = approved()
    settings.RECEIVER_TEST_LOOKUP_LAG_SECONDS = 3600  # the look-up is behind the submission: effect unknown
    take_over(cmd, crash_at("after-submit-mark", req.id))
    settings.RECEIVER_TEST_LOOKUP_LAG_SECONDS = 0  # caught up: its "not found" is evidence now
    req = DeletionRequest.objects.get(id=req.id)
    assert req.status == Status.RETRY_WAIT and req.open_question
    client = login("operator")
    page = client.get(url("change", req)).content.decode()
    assert '<a class="button" id="action-settle"' in page and "status-effect_unknown" in page
    # The confirmation names the operation, where to check it and what the target last answered.
    row = req.stages.get(is_current=True)
    confirm = client.get(url("settle", req)).content.decode()
    assert str(row.operation_id) in confirm and "gate_user" in confirm
    assert "demo target system at http" in confirm and "before the submission" in confirm
    done = client.post(url("settle", req), {"reason": "checked the target's log", "confirm": "on"}, follow=True)
    assert "was not applied" in " ".join(messages_of(done))
    assert DeletionDecision.objects.filter(request=req, action="confirm_not_applied").exists()
    assert DeletionRequest.objects.get(id=req.id).stages.get(is_current=True).submitted_at is None
    assert "checked the target's log" in LogEntry.objects.get(object_id=str(req.pk)).get_change_message()


@pytest.mark.django_db(transaction=True)
def test_confirm_not_applied_is_refused_when_the_target_has_the_record(cmd, login, staff, settings) -> None:
    req = approved()
    crashed = crash_at("after-effect", req.id)  # applied at the target, then the worker died
    settings.RECEIVER_TEST_LOOKUP_LAG_SECONDS = 3600  # ... and the target's look-up lags behind
    take_over(cmd, crashed)
    assert DeletionRequest.objects.get(id=req.id).status == Status.RETRY_WAIT  # unknown to the worker
    settings.RECEIVER_TEST_LOOKUP_LAG_SECONDS = 0  # the record now shows
    done = login("operator").post(url("settle", req), {"reason": "looked", "confirm": "on"}, follow=True)
    assert "has a record of operation" in " ".join(messages_of(done))
    assert not DeletionDecision.objects.filter(request=req, action="confirm_not_applied").exists()
    assert not LogEntry.objects.exists()


# -- attempts never disappear -------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_failed_then_successful_stage_keeps_both_attempts(login, staff) -> None:
    req = approved()
    worker.run(req.id, executor_id="w1", next_step=True)  # gate
    worker.run(req.id, executor_id="w1", options=RunOptions(fail_stage="purge_db"))
    with time_machine.travel(clock.now() + timedelta(seconds=31), tick=False):
        worker.run(req.id, executor_id="w2", next_step=True)
    rows = list(StageAttempt.objects.filter(request=req, stage__stage="purge_db").order_by("attempt"))
    assert [(a.attempt, a.executor, a.outcome) for a in rows] == [(1, "w1", "failed"), (2, "w2", "completed")]
    assert "injected failure in purge_db" in rows[0].error and rows[0].finished_at is not None
    page = login("support").get(url("change", req)).content.decode()
    assert "injected failure in purge_db" in page and "claimed" in page
    assert "stage failed: purge db" in page  # the timeline shows the failure, not only lease lines


@pytest.mark.django_db(transaction=True)
def test_a_stage_failing_on_every_retry_says_its_error_a_bounded_number_of_times(login, staff) -> None:
    """Four failures in a row: the last action, the lease table, the first attempt and one timeline
    line say the error; the other attempts say "the same as above" (it was said twice a failure)."""
    req = approved()
    worker.run(req.id, executor_id="w1", next_step=True)  # gate
    at = clock.now()
    for n in range(4):
        with time_machine.travel(at + timedelta(minutes=10 * n), tick=False):
            worker.run(req.id, executor_id=f"w{n}", options=RunOptions(fail_stage="purge_db"))
    assert StageAttempt.objects.filter(request=req, outcome="failed").count() == 4
    page = login("support").get(url("change", req)).content.decode()
    assert page.count(">the same as above</span>") == 3  # each with the error as its hover title
    shown = page.count("injected failure in purge_db") - 3
    assert shown <= 5, shown  # last action, lease table, first attempt, timeline: not once per failure
    assert "stage failed: purge db, 4 times in a row" in page


# -- bulk cancel and CSV export -------------------------------------------------------------------------


def test_bulk_cancel_shows_the_requests_then_cancels_each_with_one_reason(login, staff) -> None:
    a, b = approved("demo:a1"), approved("demo:b1")
    client = login("operator")
    changelist = reverse("admin:deletions_deletionrequest_changelist")
    confirm = client.post(changelist, {"action": "cancel_selected", "_selected_action": [a.pk, b.pk]})
    assert (
        confirm.status_code == 200 and "demo:a1" in confirm.content.decode() and "demo:b1" in confirm.content.decode()
    )
    assert DeletionRequest.objects.filter(status=Status.CANCELLED).count() == 0  # nothing yet
    client.post(
        changelist,
        {"action": "cancel_selected", "_selected_action": [a.pk, b.pk], "confirm": "yes", "reason": "duplicates"},
    )
    assert set(DeletionRequest.objects.values_list("status", flat=True)) == {Status.CANCELLED}
    assert LogEntry.objects.count() == 2


def test_bulk_cancel_is_not_offered_without_the_permission(login, staff) -> None:
    approved()
    page = login("support").get(reverse("admin:deletions_deletionrequest_changelist"))
    assert "cancel_selected" not in page.content.decode()


def test_csv_export_follows_the_list_filters(login, staff) -> None:
    approved("demo:a1")
    deletion_submit(target="demo:b1", actor=named("operator-1"))
    client = login("support")
    export = client.get(reverse("admin:deletions_deletionrequest_export"), {"status__exact": "approved"})
    assert export.status_code == 200 and export["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(export.content.decode())))
    # Support sees targets masked (core.access), in the export as on the page.
    assert [r["target"] for r in rows] == ["demo:…"] and rows[0]["status"] == "approved"
    full = login("operator").get(reverse("admin:deletions_deletionrequest_export"), {"status__exact": "approved"})
    (row,) = list(csv.DictReader(io.StringIO(full.content.decode())))
    assert row["target"] == "demo:a1" and row["approver"] == "approver-1" and row["approved_at"]
    assert row["due_at"] and row["received_at"] and row["completed_at"] == ""
    bad = client.get(reverse("admin:deletions_deletionrequest_export"), {"nosuchfield__exact": "1"})
    assert bad.status_code == 404


def test_csv_export_quotes_cells_a_spreadsheet_would_run(login, staff) -> None:
    """A username may begin with "+" or "-": in the export it must not run as a formula."""
    from django.contrib.auth.models import Group, User

    formula = User.objects.create_user("+SUM(1)", email="f@hq.example", is_staff=True)
    formula.groups.add(Group.objects.get(name="operators"))
    deletion_submit(target="demo:formula", actor=named("+SUM(1)"))
    export = login("operator").get(reverse("admin:deletions_deletionrequest_export"))
    row = next(r for r in csv.DictReader(io.StringIO(export.content.decode())) if r["target"] == "demo:formula")
    assert row["requested_by"] == "'+SUM(1)"  # quoted: a spreadsheet shows it as text
    assert row["created_at"][:2] == "20" and row["created_at"].endswith("+00:00")  # a time to the second


# -- django-q2's admin --------------------------------------------------------------------------------


def test_the_products_schedules_cannot_be_deleted_from_the_admin(client, staff) -> None:
    from django.contrib.auth.models import User

    ensure_schedules()
    root = User.objects.create_superuser("root-1", "root@hq.example", "pw")
    client.force_login(root)
    schedule = Schedule.objects.get(name=next(iter(SCHEDULES)))
    page = client.get(reverse("admin:django_q_schedule_delete", args=[schedule.pk]))
    assert page.status_code == 403
    listing = client.get(reverse("admin:django_q_schedule_changelist")).content.decode()
    assert "delete_selected" not in listing
    assert Schedule.objects.filter(name__in=SCHEDULES).count() == len(SCHEDULES)


@pytest.mark.django_db(transaction=True)
def test_a_stage_failure_is_a_failed_task_linked_to_its_case(client, staff, monkeypatch, caplog) -> None:
    """django-q2 records the run as failed (not under successful tasks), and its admin links the case."""
    from django.contrib.auth.models import User
    from django_q.models import Failure, Success

    from deletions import handlers

    req = approved()
    real = handlers.receiver.grant

    def broken_purge(lease, row, **kwargs):  # the purge's grant cannot be signed: a failure before any send
        if row.stage == "purge_db":
            raise ConnectionError("the signing service reset the connection")
        return real(lease, row, **kwargs)

    monkeypatch.setattr(handlers.receiver, "grant", broken_purge)
    through_django_q("deletions.tasks.run_deletion", str(req.id))
    assert DeletionRequest.objects.get(id=req.id).status == Status.RETRY_WAIT
    failed = Failure.objects.get(func="deletions.tasks.run_deletion")
    assert "stage failed; retry not before" in str(failed.result)
    # The console (django-q2's own log line): one line for an expected retry, no traceback.
    said = [r.getMessage() for r in caplog.records if "Failed 'deletions.tasks.run_deletion'" in r.getMessage()]
    assert len(said) == 1 and "stage failed; retry not before" in said[0], said
    assert "Traceback" not in said[0] and "Traceback" in str(failed.result)  # the task list keeps it
    assert not Success.objects.filter(func="deletions.tasks.run_deletion").exists()
    client.force_login(User.objects.create_superuser("root-1", "root@hq.example", "pw"))
    listing = client.get(reverse("admin:django_q_failure_changelist")).content.decode()
    assert url("change", req) in listing
    assert f'title="{failed.started:%Y-%m-%d %H:%M:%S} UTC"' in listing  # to the second, relative beside it
    found = re.search(r"\d:\d\d:\d\d\.\d{6}", listing)
    assert not found, listing[found.start() - 300 : found.end() + 50] if found else ""  # no microsecond time


def through_django_q(func: str, *args: str) -> None:
    """One task through django-q2's own worker and monitor, in this process (what a cluster does
    with it, without `sync`, which re-raises instead of saving the failure)."""
    from multiprocessing import Queue, Value

    from django.utils import timezone
    from django_q.monitor import monitor
    from django_q.worker import worker

    tasks: Queue[Any] = Queue()
    results: Queue[Any] = Queue()
    tasks.put(
        {"id": "test-task", "name": "test-task", "func": func, "args": args, "kwargs": {}, "started": timezone.now()}
    )
    tasks.put("STOP")
    worker(tasks, results, Value("f", -1))
    results.put("STOP")
    monitor(results)


def test_search_finds_a_case_by_its_id_prefix_or_its_requester(login, staff) -> None:
    mine = deletion_submit(target="demo:zed", actor=named("operator-1"), reason="ticket DSR-7")
    other = approved()
    client = login("operator")
    listing = reverse("admin:deletions_deletionrequest_changelist")
    page = client.get(listing, {"q": str(mine.id)[:8]}).content.decode()
    assert url("change", mine) in page and url("change", other) not in page
    page = client.get(listing, {"q": str(mine.id).upper()[:13]}).content.decode()  # with its dash, any case
    assert url("change", mine) in page and url("change", other) not in page
    page = client.get(listing, {"q": "Operator-1"}).content.decode()  # the requester
    assert url("change", mine) in page
    page = client.get(listing, {"q": "dsr-7"}).content.decode()  # the submitter's reason, its ticket
    assert url("change", mine) in page and url("change", other) not in page
    page = client.get(listing, {"q": str(other.id)[:6]}).content.decode()
    assert url("change", other) in page and (url("change", mine) not in page or str(mine.id)[:6] == str(other.id)[:6])


def test_failed_this_week_lists_the_cases_with_a_failure_in_the_last_seven_days(login, staff) -> None:
    """The saved view reads the week's failed attempts through their own index: a stage that
    failed today is listed, one that failed eight days ago and a case that never failed are not."""
    recent, old, fine = approved("demo:fw-recent"), approved("demo:fw-old"), approved("demo:fw-fine")
    with time_machine.travel(clock.now() - timedelta(days=8), tick=False):
        worker.run(old.id, executor_id="w-old", options=RunOptions(fail_stage="purge_db"))
    worker.run(recent.id, executor_id="w-new", options=RunOptions(fail_stage="purge_db"))
    worker.run(fine.id, executor_id="w-fine", next_step=True)
    assert StageAttempt.objects.filter(request=old, outcome="failed").exists()
    page = login("operator").get(reverse("admin:deletions_deletionrequest_changelist"), {"view": "failed-week"})
    listed = {r.target for r in (recent, old, fine) if url("change", r) in page.content.decode()}
    assert listed == {"demo:fw-recent"}


INDEX_APPS = ["deletions", "retirements", "django_q", "auth"]


def test_the_index_puts_the_product_first_and_links_no_public_site(client, staff) -> None:
    """Alphabetical would put Authentication and Django Q above the product."""
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_superuser("root-2", "root2@hq.example", "pw"))
    page = client.get(reverse("admin:index")).content.decode()
    assert "View site" not in page
    order = [page.find(f'class="app-{label} ') for label in INDEX_APPS]
    assert -1 not in order and order == sorted(order), dict(zip(INDEX_APPS, order, strict=True))


def test_saved_views_are_shareable_links_for_the_questions_staff_ask_first(login, staff) -> None:
    from tests.support import force

    waiting = deletion_submit(target="demo:yan", actor=named("operator-1"))  # waits on the approvers
    late = deletion_submit(target="demo:alice", actor=named("operator-a"))  # never held by its submitter
    deletion_approve(request_id=late.id, actor=named("approver-1"), digest=late.inventory_digest)
    force(DeletionRequest.objects.filter(id=late.id), status=Status.NEEDS_ATTENTION, owner="operator-1",
          next_check_at=clock.now() - timedelta(minutes=10))  # fmt: skip
    deletion_name_by_rota()  # the custody tick names the operator on call for it
    listing = reverse("admin:deletions_deletionrequest_changelist")

    def ids(who: str, view: str) -> set[str]:
        page = login(who).get(listing, {"view": view}).content.decode()
        return {str(r.id) for r in (waiting, late) if url("change", r) in page}

    assert ids("approver", "mine") == {str(waiting.id)}  # an approval waits for them
    assert ids("operator", "mine") == {str(late.id)}  # they own the case that needs attention
    assert ids("operator", "overdue") == {str(late.id)}  # its check is 10 min past
    assert ids("operator", "failed-week") == set()
    page = login("operator").get(listing).content.decode()
    assert "?view=mine" in page and "waiting for me" in page and "failed this week" in page
