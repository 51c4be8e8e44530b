"""The back-office in headless Chromium (Debian's package) driven by Playwright.

Screenshots of the case pages land in test-artifacts/screenshots/.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, Permission, User

from core import clock
from core.authority import Actor, named
from deletions.models import DeletionRequest
from deletions.services import deletion_submit
from ops.groups import ensure_groups
from retirements.models import Lifecycle, RetirementRequest, Workspace
from retirements.services import retirement_request
from tests.browser.chromium import ARTIFACTS, PASSWORD, require_chromium

require_chromium()

from playwright.sync_api import Browser, Page, expect  # noqa: E402

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def people(db) -> dict[str, User]:
    ensure_groups(Group, Permission)
    out = {}
    for username, group in (
        ("operator-1", "operators"),
        ("operator-2", "operators"),  # a held case names a person and a different backup who may act
        ("approver-1", "approvers"),
        ("approver-2", "approvers"),
        ("support-1", "support (read-only)"),
    ):
        user = User.objects.create_user(username, email=f"{username}@hq.example", password=PASSWORD, is_staff=True)
        user.groups.add(Group.objects.get(name=group))
        out[username] = user
    return out


def log_in(browser: Browser, live_server, username: str) -> Page:
    page = browser.new_page(viewport={"width": 1300, "height": 1000})
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page.locator("#user-tools")).to_contain_text(username)
    return page


def shot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000
    return path


def test_approver_approves_a_deletion_through_the_confirmation_page(browser, live_server, people) -> None:
    req = deletion_submit(target="demo:alice", actor=named("operator-1"))
    page = log_in(browser, live_server, "approver-1")
    page.goto(f"{live_server.url}/admin/deletions/deletionrequest/{req.pk}/change/")
    expect(page.locator("#case-panel")).to_contain_text("waiting for an approver (not the submitter)")
    shot(page, "deletion-case-submitted")
    page.click("#action-approve")
    expect(page.locator("#inventory-digest")).to_have_attribute("title", req.inventory_digest)  # short, full on hover
    shot(page, "deletion-approve-confirmation")
    page.check("#id_confirm")
    page.click("#confirm-action")
    expect(page.locator(".messagelist")).to_contain_text("Approved the deletion of demo:alice.")
    expect(page.locator("#case-panel")).to_contain_text("queued for a free worker")
    shot(page, "deletion-case-approved")
    assert DeletionRequest.objects.get(id=req.id).status == "approved"
    page.close()


def test_operator_holds_and_releases_a_retirement(browser, live_server, people) -> None:
    Workspace.objects.create(
        slug="globex-old", name="Globex", lifecycle=Lifecycle.DISABLED, activated_at=clock.now(), created_at=clock.now()
    )
    req = retirement_request(
        actor=Actor.of(people["operator-1"]), slug="globex-old", reason="contract ended", confirmation="globex-old"
    )
    page = log_in(browser, live_server, "operator-1")
    page.goto(f"{live_server.url}/admin/retirements/retirementrequest/{req.pk}/change/")
    expect(page.locator("#timeline")).to_be_visible()
    shot(page, "retirement-case-waiting")
    page.click("#action-hold")
    page.fill("#id_reason", "owner disputes the request")
    page.click("#confirm-action")
    expect(page.locator(".messagelist")).to_contain_text("Retirement held.")
    expect(page.locator("#case-panel")).to_contain_text("on hold: owner disputes the request")
    shot(page, "retirement-case-held")
    page.click("#action-release")
    page.fill("#id_reason", "owner agreed")
    page.click("#confirm-action")
    expect(page.locator(".messagelist")).to_contain_text("Hold released")
    expect(page.locator("#case-panel")).to_contain_text("in its waiting period")
    shot(page, "retirement-case-released")
    assert RetirementRequest.objects.get(id=req.id).status == "waiting"
    page.close()


def test_support_opens_the_operations_overview(browser, live_server, people) -> None:
    deletion_submit(target="demo:bob", actor=named("operator-1"))
    page = log_in(browser, live_server, "support-1")
    page.click("text=Operations overview")
    # Support sees the target masked (core.access), and who holds the approval (one of the approvers' rota).
    expect(page.locator("#waiting-on-human")).to_contain_text("deletion demo:…")
    expect(page.locator("#waiting-on-human")).to_contain_text(re.compile(r"approver-[12]"))
    assert "demo:bob" not in page.locator("#waiting-on-human").inner_text()
    shot(page, "operations-overview")
    page.close()
