"""Every admin page in Debian's chromium at 1280x800 and 390x844: no sideways scroll at
1280, no overlapping timeline labels, no serious or critical axe-core violation, and a
screenshot of each under test-artifacts/screenshots/ (`<page>-1280.png`, `<page>-390.png`).

The cases are the demo's (`ops.demo.seed`): each state made by the real services and
workers, the effect-unknown one by a worker process killed after it submitted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone
from django_q.models import Schedule

from core.authority import named
from deletions.models import DeletionRequest
from deletions.services import deletion_approve, deletion_submit
from deletions.store import leases
from ops import demo
from ops.groups import ensure_groups
from ops.schedules import ensure_schedules
from retirements.models import RetirementRequest, Workspace
from tests.browser.chromium import ARTIFACTS, PASSWORD, require_chromium
from tests.conftest import run_command
from tests.deletions.helpers import crash_at, take_over
from tests.support import force

require_chromium()

from playwright.sync_api import Browser, Page  # noqa: E402

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

WIDTHS = {1280: 800, 390: 844}
# Never on any page: a time with fractions of a second, a permission's code instead of its words.
WORDS_NEVER_SHOWN = [
    (r"\d\d:\d\d:\d\d[.,]\d{3,6}", "a time with microseconds"),
    (r"\b(?:deletions|retirements|ops)\.[a-z]+_[a-z_]+\b", "a permission code"),
]
BAD = ("serious", "critical")


@dataclass(frozen=True)
class Shot:
    name: str
    path: str
    status: int = 200


def deletion(target: str, view: str = "change") -> str:
    req = DeletionRequest.objects.get(target=target)
    return reverse(f"admin:deletions_deletionrequest_{view}", args=[req.pk])


def retirement(slug: str, view: str = "change") -> str:
    req = RetirementRequest.objects.get(workspace__slug=slug)
    return reverse(f"admin:retirements_retirementrequest_{view}", args=[req.pk])


def pages() -> list[Shot]:
    hooli = Workspace.objects.get(slug="hooli-trial")
    schedule = Schedule.objects.order_by("id").first()
    assert schedule is not None
    out = [
        Shot("index", reverse("admin:index")),
        Shot("operations-overview", reverse("operations")),
        Shot("deletions-list", reverse("admin:deletions_deletionrequest_changelist")),
        Shot("retirements-list", reverse("admin:retirements_retirementrequest_changelist")),
        Shot("workspaces-list", reverse("admin:retirements_workspace_changelist")),
        Shot("workspace-page", reverse("admin:retirements_workspace_change", args=[hooli.pk])),
        Shot("q-successful-tasks", reverse("admin:django_q_success_changelist")),
        Shot("q-failed-tasks", reverse("admin:django_q_failure_changelist")),
        Shot("q-schedules", reverse("admin:django_q_schedule_changelist")),
        Shot("q-schedule-page", reverse("admin:django_q_schedule_change", args=[schedule.pk])),
        Shot("q-queued-tasks", reverse("admin:django_q_ormq_changelist")),
        Shot("users-list", reverse("admin:auth_user_changelist")),
        Shot("deletion-submit", reverse("admin:deletions_deletionrequest_add")),
        Shot("not-found", "/admin/deletions/deletionrequest/zzz/change/", 404),
        Shot("bad-filter-value", "/admin/deletions/deletionrequest/?status__exact=%00", 400),
    ]
    for target, state in (
        ("demo:alice", "submitted"),
        ("demo:bob", "approved"),
        ("demo:quinn", "queued"),
        ("demo:carol", "completed"),
        ("demo:dave", "retry-wait"),
        ("demo:erin", "cancelled"),
        ("demo:frank", "needs-attention"),
        ("demo:grace", "running-lease-of-a-lost-worker"),
        ("demo:heidi", "needs-review"),
        ("demo:ivan", "effect-unknown"),
        ("manual:vendor-crm/judy@example.com", "waiting-for-an-operator"),
    ):
        out.append(Shot(f"deletion-case-{state}", deletion(target)))
        out.append(Shot(f"deletion-history-{state}", deletion(target, "history")))
    out += [
        Shot("deletion-confirm-approve", deletion("demo:alice", "approve")),
        Shot("deletion-confirm-cancel", deletion("demo:bob", "cancel")),
        Shot("deletion-confirm-run", deletion("demo:bob", "run")),
        Shot("deletion-confirm-revoke", deletion("demo:bob", "revoke")),
        Shot("deletion-confirm-resume", deletion("demo:frank", "resume")),
        Shot("deletion-confirm-settle", deletion("demo:ivan", "settle")),  # the case with an unknown effect
        Shot("deletion-confirm-record", deletion("manual:vendor-crm/judy@example.com", "record")),
        Shot("retirement-case-waiting", retirement("initech-old")),
        Shot("retirement-case-held", retirement("globex-old")),
        Shot("retirement-confirm-hold", retirement("initech-old", "hold")),
        Shot("retirement-confirm-release", retirement("globex-old", "release")),
        Shot("retirement-confirm-cancel", retirement("initech-old", "cancel")),
        Shot("retirement-confirm-resume", retirement("initech-old", "resume")),
        Shot("retirement-confirm-retry-notices", retirement("initech-old", "retry_notices")),
        Shot(
            "workspace-confirm-request-retirement",
            reverse("admin:retirements_workspace_request_retirement", args=[hooli.pk]),
        ),
        Shot("workspace-confirm-protect", reverse("admin:retirements_workspace_protect", args=[hooli.pk])),
        Shot("inbox", reverse("inbox")),
        Shot("notification-preferences", reverse("notification-preferences")),
        Shot("retention-runs", reverse("admin:ops_retentionrun_changelist")),
        Shot("tombstones", reverse("admin:ops_tombstone_changelist")),
        Shot("records-holds", reverse("admin:ops_recordshold_changelist")),
        Shot("deletion-proof-completed", deletion("demo:carol", "proof")),
        Shot("retirement-proof-held", retirement("globex-old", "proof")),
        Shot("deletion-confirm-assign", deletion("demo:alice", "assign")),
        Shot("deletion-confirm-extend-deadline", deletion("demo:alice", "extend_deadline")),
        Shot("deletion-confirm-reveal", deletion("demo:alice", "reveal")),
        Shot("personal-tokens", reverse("admin:core_apitoken_changelist")),
        Shot("personal-token-new", reverse("admin:core_apitoken_add")),
        Shot("webhook-deliveries", reverse("admin:api_webhookdelivery_changelist")),
    ]
    return out


@pytest.fixture
def seeded(db) -> Iterator[User]:
    ensure_groups(Group, Permission)
    ensure_schedules()
    root = User.objects.create_superuser("demo", "demo@localhost", PASSWORD)
    demo.ensure_users(PASSWORD, reset=True)
    assert demo.seed(root)
    ivan = deletion_submit(actor=named("operator-1"), target="demo:ivan")
    deletion_approve(actor=named("approver-1"), request_id=ivan.id, digest=ivan.inventory_digest)
    crashed = crash_at("after-submit-mark", ivan.id)
    with override_settings(RECEIVER_TEST_LOOKUP_LAG_SECONDS=3600):  # the look-up is behind the submission
        take_over(run_command, crashed)
    unknown = DeletionRequest.objects.get(id=ivan.id)
    assert unknown.status == "retry_wait" and "effect unknown" in (unknown.last_error or "")  # the state shot
    # A stage running now: a worker holds demo:bob's lease while its saved next check lies long past.
    bob = DeletionRequest.objects.get(target="demo:bob")
    assert leases.claim(request_id=bob.id, owner="q:vm:4242", now=timezone.now(), lease_seconds=3600) is not None
    force(
        DeletionRequest.objects.filter(id=bob.id), status="running", next_check_at=timezone.now() - timedelta(minutes=9)
    )
    # And one approved with no worker free yet: queued, never "effect unknown".
    quinn = deletion_submit(actor=named("operator-1"), target="demo:quinn")
    deletion_approve(actor=named("approver-1"), request_id=quinn.id, digest=quinn.inventory_digest)
    yield root


CONSOLE: list[str] = []  # every console error and uncaught page error (a CSP violation is one)


def log_in(browser: Browser, live_server, username: str, width: int) -> Page:
    page = browser.new_page(viewport={"width": width, "height": WIDTHS[width]})
    page.on("console", lambda m: CONSOLE.append(f"{page.url}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: CONSOLE.append(f"{page.url}: {e}"))
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#user-tools")
    return page


def cut_off(page: Page) -> list[str]:
    """Lists and tables whose columns do not fit their box (they would scroll inside it)."""
    return page.evaluate(
        """() => [...document.querySelectorAll('#changelist .results, .table-wrap')]
            .filter(e => e.scrollWidth > e.clientWidth + 1)
            .map(e => (e.id || e.className) + ' ' + e.scrollWidth + '>' + e.clientWidth)"""
    )


def svg_overlaps(page: Page) -> list[str]:
    """Pairs of text boxes that intersect in the visible timeline (getBBox)."""
    return page.evaluate(
        """() => {
        const out = [];
        for (const svg of document.querySelectorAll('svg.timeline')) {
            if (svg.getBoundingClientRect().width === 0) continue;  // the other width's picture
            const boxes = [...svg.querySelectorAll('text')].map(t => [t.textContent, t.getBBox()]);
            for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
                const [ta, a] = boxes[i], [tb, b] = boxes[j];
                if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height)
                    out.push(ta + ' / ' + tb);
            }
        }
        return out;
    }"""
    )


def test_every_page_fits_reads_and_passes_axe(browser, live_server, seeded) -> None:
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []

    def check(page: Page, name: str, width: int) -> None:
        page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)
        text = page.inner_text("body")
        for pattern, what in WORDS_NEVER_SHOWN:
            for found in re.findall(pattern, text)[:3]:
                problems.append(f"{name}@{width}: {what}: {found!r}")
        if name == "deletion-case-queued" and ("effect is unknown" in text or "queued, waiting for a free" not in text):
            problems.append(f"{name}@{width}: a queued case must read as queued, never as effect unknown")
        if name == "deletion-case-approved" and "overdue" in text:
            problems.append(f"{name}@{width}: 'overdue' on a case a worker holds now")
        if name == "deletions-list" and "overdue" in page.locator("tr", has_text="demo:bob").first.inner_text():
            problems.append(f"{name}@{width}: 'overdue' on the row of a case a worker holds now")
        reasons = [t.strip() for t in page.locator("#case-actions .why").all_text_contents()]
        for said in {r for r in reasons if reasons.count(r) > 1}:
            problems.append(f"{name}@{width}: the reason {said[:60]!r} is said {reasons.count(said)} times")
        has_form = page.locator("#content form textarea, #content form input[type=text]").count() > 0
        if width == 390:  # a table of names and values stacks on a phone: nothing of it is cut off
            for cut in page.evaluate(
                """() => [...document.querySelectorAll('table.kv')]
                    .filter(t => t.getBoundingClientRect().width > 0 && t.scrollWidth > t.parentElement.clientWidth + 1)
                    .map(t => (t.id || 'kv') + ' ' + t.scrollWidth + '>' + t.parentElement.clientWidth)"""
            ):
                problems.append(f"{name}@{width}: a names-and-values table is cut off: {cut}")
            if name in ("deletions-list", "retirements-list"):  # each case a card on a phone
                for cut in cut_off(page):
                    problems.append(f"{name}@{width}: columns cut off in {cut}")
                for cell in page.evaluate(
                    """() => [...document.querySelectorAll('#result_list tbody tr:first-child td')]
                        .filter(td => /field-(next_check|created|owner|backup|requested_by|requested)\\b/
                            .test(td.className))
                        .filter(td => !/[a-z]/.test(getComputedStyle(td, '::before').content))
                        .map(td => td.className)"""
                ):
                    problems.append(f"{name}@{width}: the card's {cell} does not say what it is")
        if width == 390 and has_form:
            wide = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
            if wide[0] > wide[1]:
                problems.append(f"{name}@{width}: a form scrolls sideways ({wide[0]} > {wide[1]} px)")
        if width == 1280:
            wide = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
            if wide[0] > wide[1]:
                problems.append(f"{name}@{width}: scrolls sideways ({wide[0]} > {wide[1]} px)")
            for cut in cut_off(page):
                problems.append(f"{name}@{width}: columns cut off in {cut}")
        for pair in svg_overlaps(page):
            problems.append(f"{name}@{width}: timeline labels overlap: {pair}")
        for v in axe.run(page).response["violations"]:
            if v["impact"] in BAD:
                where = "; ".join(n["target"][0] for n in v["nodes"][:3])
                problems.append(f"{name}@{width}: axe {v['impact']} {v['id']} at {where}")

    for width in WIDTHS:
        page = log_in(browser, live_server, "demo", width)
        for shot in pages():
            response = page.goto(f"{live_server.url}{shot.path}")
            assert response is not None
            if response.status != shot.status:
                problems.append(f"{shot.name}@{width}: HTTP {response.status}, expected {shot.status}")
                continue
            if "default-src 'self'" not in (response.headers.get("content-security-policy") or ""):
                problems.append(f"{shot.name}@{width}: no Content-Security-Policy header")
            check(page, shot.name, width)
        # The pages a POST leads to: the submit confirmation and the bulk-cancel confirmation.
        page.goto(f"{live_server.url}{reverse('admin:deletions_deletionrequest_add')}")
        page.fill("#id_target", f"demo:zoe-{width}")
        page.fill("#id_reason", "ticket DEL-200")
        page.click("#preview-action")
        page.wait_for_selector("#inventory")
        check(page, "deletion-submit-confirmation", width)
        page.goto(f"{live_server.url}{reverse('admin:deletions_deletionrequest_changelist')}")
        page.locator("input.action-select").nth(0).check()
        page.locator("input.action-select").nth(1).check()
        page.select_option("select[name=action]", "cancel_selected")
        page.click("button[name=index]")
        page.wait_for_selector("#bulk-list")
        check(page, "deletions-bulk-cancel-confirmation", width)
        page.close()
        # Custody as an approver reads it: their inbox, and a case's person, backup and days left.
        page = log_in(browser, live_server, "approver-1", width)
        page.goto(f"{live_server.url}{reverse('inbox')}")
        check(page, "inbox-as-approver", width)
        if "you hold it" not in page.inner_text("#inbox") and "you are its backup" not in page.inner_text("#inbox"):
            problems.append(f"inbox-as-approver@{width}: approver-1 holds or backs up no case in the demo")
        page.goto(f"{live_server.url}{deletion('demo:alice')}")
        check(page, "deletion-case-custody-as-approver", width)
        panel = page.inner_text("#case-panel")
        if "(backup: " not in panel or "days left" not in panel:
            problems.append(f"deletion-case-custody-as-approver@{width}: no person, backup or days left: {panel!r}")
        page.close()
        if width == 390:  # a phone: what support sees of a case, masked
            page = log_in(browser, live_server, "support-1", width)
            page.goto(f"{live_server.url}{deletion('demo:alice')}")
            check(page, "deletion-case-masked-as-support", width)
            if "demo:alice" in page.inner_text("body"):
                problems.append(f"deletion-case-masked-as-support@{width}: support sees the full target")
            page.close()
    # The API's interactive docs (swagger-ui, a library's page: its own accessibility is not ours to
    # fix) render under the same Content-Security-Policy with no console error.
    page = log_in(browser, live_server, "support-1", 1280)
    response = page.goto(f"{live_server.url}/api/v1/docs")
    assert response is not None and "script-src 'self'" in (response.headers.get("content-security-policy") or "")
    page.wait_for_selector(".swagger-ui .opblock", timeout=15_000)
    page.screenshot(path=str(ARTIFACTS / "api-docs-1280.png"), full_page=True)
    response = page.goto(f"{live_server.url}{deletion('demo:alice', 'approve')}")
    assert response is not None and response.status == 403
    check(page, "forbidden", 1280)
    page.close()
    problems += [f"console error: {line}" for line in CONSOLE if "status of 40" not in line]  # 403/404/400 shots
    assert not problems, "\n".join(problems)


def test_a_support_lead_sees_every_action_disabled_with_its_reason(browser, live_server, seeded) -> None:
    page = log_in(browser, live_server, "support-1", 1280)
    page.goto(f"{live_server.url}{deletion('demo:alice')}")
    assert page.locator("a#action-approve").count() == 0
    reason = page.locator("#action-approve").get_attribute("aria-describedby")
    assert "only staff allowed to approve deletion requests" in (page.locator(f"#{reason}").text_content() or "")
    assert "Not available now:" in page.locator("#actions-unavailable summary").inner_text()
    page.screenshot(path=str(ARTIFACTS / "deletion-case-submitted-as-support-1280.png"), full_page=True)
    page.close()


def test_a_running_case_updates_itself_without_a_reload(browser, live_server, seeded) -> None:
    """htmx polls the live part of the page; a change made elsewhere shows without a reload."""
    from core.authority import named
    from deletions.services import deletion_cancel

    page = log_in(browser, live_server, "operator-1", 1280)
    page.goto(f"{live_server.url}{deletion('demo:bob')}")
    page.evaluate("() => { window.__notReloaded = true; }")
    bob = DeletionRequest.objects.get(target="demo:bob")
    deletion_cancel(actor=named("operator-1"), request_id=bob.id, reason="changed elsewhere")
    page.wait_for_function(
        # A worker holds demo:bob now: the cancellation is recorded and the worker stops at its next transition.
        "() => document.querySelector('#case-panel').innerText.includes('cancellation recorded')",
        timeout=15_000,
    )
    assert page.evaluate("() => window.__notReloaded === true")  # the same document: updated in place
    page.close()


# The case pages a support lead opens first, as the docs show them (docs/explanation/case-pages.md,
# copied there by `make screenshots`): what each must say on its first screen, without scrolling.
FIRST_SCREENS = {
    "running": ("demo:bob", ["Running", "nothing: the system is working"]),
    "late-heartbeat": (
        "demo:grace",
        ["effect unknown", "not reporting since", "the next worker looks the operation up"],
    ),
    "waiting-for-approval": ("demo:alice", ["waiting for an approver (not the submitter)"]),
    "needing-attention": ("demo:frank", ["needing attention", "failed 10 times"]),
    "manual-target": ("manual:vendor-crm/judy@example.com", ["apply", "by hand"]),
}


def test_the_case_pages_a_support_lead_opens_first(browser, live_server, seeded) -> None:
    """Each at 1280 and 390 px, as support-1 (targets masked): its first screen says what is being
    changed, the state in words and the one question (or that the system is working), and no
    reason is said twice on the page."""
    grace = DeletionRequest.objects.get(target="demo:grace")
    now = timezone.now()  # its worker lost 9 minutes ago, 6 minutes before its 15-minute lease lapses
    force(DeletionRequest.objects.filter(id=grace.id), heartbeat_at=now - timedelta(minutes=9),
          lease_expires_at=now + timedelta(minutes=6))  # fmt: skip
    tour = ARTIFACTS / "case-pages"
    tour.mkdir(parents=True, exist_ok=True)
    problems = []
    for width in WIDTHS:
        page = log_in(browser, live_server, "support-1", width)
        for name, (target, words) in FIRST_SCREENS.items():
            page.goto(f"{live_server.url}{deletion(target)}")
            page.screenshot(path=str(tour / f"{name}-{width}.png"))  # the first screen only
            first = page.evaluate(
                """() => [...document.querySelectorAll('#content *')]
                    .filter(e => e.children.length === 0 && e.getBoundingClientRect().top < window.innerHeight
                                 && e.getBoundingClientRect().bottom > 0)
                    .map(e => e.textContent).join(' ')"""
            )
            first = " ".join(first.split())
            for said in words:
                if said.lower() not in first.lower():
                    problems.append(f"{name}@{width}: {said!r} is not on the first screen: {first[:400]!r}")
            reasons = [" ".join(t.split()) for t in page.locator(".why").all_text_contents()]
            for said in {r for r in reasons if reasons.count(r) > 1}:
                problems.append(f"{name}@{width}: the reason {said[:60]!r} is said {reasons.count(said)} times")
            body = page.inner_text("body")
            if target.split(":", 1)[1] in body:
                at = body.index(target.split(":", 1)[1])
                problems.append(f"{name}@{width}: support sees the full target: {body[at - 80 : at + 40]!r}")
        page.close()
    assert not problems, "\n".join(problems)
