"""A worker killed after it submitted, as the demo's grace: its case page and the inbox of an
approver and of an operator on call, one minute later, at 1280 and 390 px wide. Screenshots land in
test-artifacts/screenshots/ (one-story-*.png).

The worker is a real `run_deletion` process with the demo's 15-minute lease, SIGKILLed right after it
saved "submitted" for its stage (`CRASH_AT=after-submit-mark`, as `ops.demo` makes grace); the clock
of the back-office (this process, and the live server's thread in it) is then moved one minute past
its last heartbeat with time-machine: three heartbeats of 10 s missed, the lease still running."""

from __future__ import annotations

import signal
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import Group, Permission, User

from core import present
from core.authority import named
from deletions.models import DeletionRequest
from deletions.services import deletion_approve, deletion_name_by_rota, deletion_submit
from ops.groups import ensure_groups
from tests.browser.chromium import PASSWORD, require_chromium
from tests.browser.test_admin_in_chromium import shot
from tests.deletions.helpers import start_worker

require_chromium()

from playwright.sync_api import Browser, Page, expect  # noqa: E402

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def demo_people(db) -> None:
    ensure_groups(Group, Permission)
    for username, group in (
        ("operator-1", "operators"),
        ("operator-2", "operators"),
        ("approver-1", "approvers"),
        ("approver-2", "approvers"),
    ):
        user = User.objects.create_user(username, email=f"{username}@hq.example", password=PASSWORD, is_staff=True)
        user.groups.add(Group.objects.get(name=group))


def log_in(browser: Browser, url: str, username: str, width: int) -> Page:
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(f"{url}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page.locator("#user-tools")).to_contain_text(username)
    return page


def test_grace_one_minute_after_its_worker_was_killed(browser, live_server, demo_people, settings) -> None:
    settings.DELETION_HEARTBEAT_SECONDS = 10  # the demo's: a beat every 10 s
    deletion_submit(target="demo:alice", actor=named("operator-a"))  # an approver's work beside it
    grace = deletion_submit(target="demo:grace", actor=named("operator-a"))
    deletion_name_by_rota()
    deletion_approve(request_id=grace.id, actor=named("approver-1"), digest=grace.inventory_digest)
    proc = start_worker(
        grace.id, "--next-step", "--executor-id", "demo-lost-worker",
        CRASH_AT="after-submit-mark", DELETION_LEASE_SECONDS="900",
    )  # fmt: skip
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, err
    killed = DeletionRequest.objects.get(id=grace.id)
    assert killed.heartbeat_at is not None and killed.lease_expires_at is not None
    assert killed.status == "running" and killed.lease_expires_at - killed.heartbeat_at == timedelta(minutes=15)
    since = f"not reporting since {present.absolute(killed.heartbeat_at)}"

    with time_machine.travel(killed.heartbeat_at + timedelta(minutes=1), tick=False):
        for width in (1280, 390):
            page = log_in(browser, live_server.url, "operator-1", width)
            page.goto(f"{live_server.url}/admin/deletions/deletionrequest/{grace.pk}/change/")
            panel = page.locator("#case-panel")
            expect(panel).to_contain_text("effect unknown")
            expect(panel).to_contain_text(since)
            expect(page.locator("#responsible")).to_contain_text("operators on call (group)")
            shot(page, f"one-story-grace-{width}")

            page.goto(f"{live_server.url}/admin/inbox/")
            inbox = page.locator("#inbox")
            expect(inbox).to_contain_text("demo:grace")
            expect(inbox).to_contain_text(since)
            expect(inbox).not_to_contain_text("queued")
            shot(page, f"one-story-inbox-operator-on-call-{width}")
            page.close()

            page = log_in(browser, live_server.url, "approver-1", width)
            page.goto(f"{live_server.url}/admin/inbox/")
            inbox = page.locator("#inbox")
            expect(inbox).to_contain_text("demo:alice")
            expect(inbox).not_to_contain_text("demo:grace")
            shot(page, f"one-story-inbox-approver-{width}")
            page.close()
