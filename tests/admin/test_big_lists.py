"""The case lists stay bounded on big tables: an estimated count says "about", a deep page is
found by its ids, and the result count shows only for a narrowed list."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import User

from core.admin import EstimatedCountPaginator
from deletions.admin import DeletionRequestAdmin
from tests.conftest import submit_and_approve

pytestmark = pytest.mark.django_db
LIST = "/admin/deletions/deletionrequest/"


@pytest.fixture
def five(client) -> list[str]:
    client.force_login(User.objects.create_superuser("root-1", "root@hq.example", "pw"))
    return [submit_and_approve(f"demo:big-{n}").target for n in range(5)]


def targets(page: str) -> list[str]:
    return re.findall(r">(demo:big-\d)</a>", page)


def test_a_small_list_is_counted_exactly(client, five) -> None:
    page = client.get(LIST).content.decode()
    assert "5 deletion requests" in page and "about" not in page.split('class="paginator"')[1]


def test_a_big_list_says_its_count_is_an_estimate(client, five, monkeypatch) -> None:
    monkeypatch.setattr(EstimatedCountPaginator, "ESTIMATE_FROM", 1)  # what 10,000 rows would do
    paginator = html.unescape(client.get(LIST).content.decode()).split('class="paginator"')[1]
    assert re.search(r"about \d+ deletion request", paginator), paginator[:300]


def test_a_deep_page_found_by_its_ids_is_the_same_page(client, five, monkeypatch) -> None:
    monkeypatch.setattr(DeletionRequestAdmin, "list_per_page", 2)
    newest_first = list(reversed(five))
    normal = targets(client.get(LIST + "?p=2").content.decode())
    monkeypatch.setattr(EstimatedCountPaginator, "DEEP", 0)  # every page past the first by its ids
    by_ids = targets(client.get(LIST + "?p=2").content.decode())
    assert normal == by_ids == newest_first[2:4]
    assert targets(client.get(LIST + "?p=3").content.decode()) == newest_first[4:]


def test_the_result_count_shows_only_for_a_narrowed_list(client, five) -> None:
    assert "Show all" not in client.get(LIST).content.decode()
    searched = client.get(LIST + "?q=big-3").content.decode()
    assert "1 result" in searched and "Show all" in searched
    filtered = client.get(LIST + "?status__exact=approved").content.decode()
    assert "5 results" in filtered and "Show all" in filtered


def _page_query(captured: list[dict], table: str) -> str:
    """The list's own page query: the one that orders the table's rows (a list that fits one page
    takes them all, with no LIMIT)."""
    pages = [q["sql"] for q in captured if q["sql"].startswith(f'SELECT "{table}".')]
    pages = [sql for sql in pages if "ORDER BY" in sql]
    assert pages, f"no page query on {table}"
    return pages[0]


def test_every_sort_offered_reads_an_index_both_ways(client, five) -> None:
    """Each column a case list offers to sort by, ascending and descending: the page's query is
    ordered by an index (no Sort in its plan with sequential scans off), so it stays a page read
    at a million rows. The columns come from the admin itself."""
    from django.contrib import admin
    from django.db import connection
    from django.test import RequestFactory
    from django.test.utils import CaptureQueriesContext

    from core import clock
    from core.authority import Actor
    from deletions.models import DeletionRequest
    from retirements.models import RetirementRequest, Workspace
    from retirements.services import retirement_request

    Workspace.objects.create(slug="sorted-ws", name="Sorted", lifecycle="disabled", created_at=clock.now())
    root = User.objects.get(username="root-1")
    retirement_request(actor=Actor.of(root), slug="sorted-ws", reason="contract ended", confirmation="sorted-ws")
    checked = []
    for model in (DeletionRequest, RetirementRequest, Workspace):
        base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        request = RequestFactory().get(base)
        request.user = User.objects.get(username="root-1")
        model_admin = admin.site._registry[model]
        changelist = model_admin.get_changelist_instance(request)
        sortable = model_admin.get_sortable_by(request)
        columns = [
            (i, c) for i, c in enumerate(changelist.list_display) if c in sortable and changelist.get_ordering_field(c)
        ]
        assert columns, model
        for i, column in columns:
            for way in (f"{i}", f"-{i}"):
                with CaptureQueriesContext(connection) as seen:
                    assert client.get(f"{base}?o={way}").status_code == 200
                sql = _page_query(seen.captured_queries, model._meta.db_table)
                if " LIMIT " not in sql:  # what a list of many pages asks: its first page
                    sql += f" LIMIT {model_admin.list_per_page}"
                with connection.cursor() as cur:
                    # With scans and sorts both made dear, an index that gives the order is taken whenever
                    # one exists, whatever the tiny table's statistics and size: a Sort left means none does.
                    cur.execute("SET LOCAL enable_seqscan = off")
                    cur.execute("SET LOCAL enable_sort = off")
                    cur.execute("SET LOCAL enable_incremental_sort = off")
                    cur.execute("EXPLAIN " + sql)
                    plan = "\n".join(row[0] for row in cur.fetchall())
                    cur.execute("SET LOCAL enable_seqscan = on")
                    cur.execute("SET LOCAL enable_sort = on")
                    cur.execute("SET LOCAL enable_incremental_sort = on")
                plan = plan.split("SubPlan")[0]  # the list's own order (a row's subquery sorts its few rows)
                name = getattr(column, "__name__", column)
                assert " Sort " not in f" {plan} " and "Sort Key" not in plan, f"{base}?o={way} ({name}):\n{plan}"
                checked.append(f"{model._meta.model_name}.{name}{'' if way[0] != '-' else ' desc'}")
    assert len(checked) == 2 * (4 + 4 + 5), checked  # deletions, retirements, workspaces: both ways each


def test_a_typed_sort_by_a_column_not_offered_shows_the_default_order(client, five) -> None:
    """`?o=` on a column the list does not offer (a person's column of the retirements, the
    deletions' target) is ignored, not run: it would join and sort every row."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from retirements.admin import RetirementRequestAdmin

    owner = RetirementRequestAdmin.list_display.index("owner")  # no bulk actions: no checkbox column
    assert "owner" not in RetirementRequestAdmin.sortable_by
    for url, table in (
        (f"/admin/retirements/retirementrequest/?o={owner}", "retirements_retirementrequest"),
        ("/admin/deletions/deletionrequest/?o=1", "entity_deletion_requests"),  # the target column
    ):
        with CaptureQueriesContext(connection) as seen:
            assert client.get(url).status_code == 200
        order = _page_query(seen.captured_queries, table).split("ORDER BY")[-1]
        newest = "requested_at" if "retirement" in table else "created_at"
        assert order.strip().startswith(f'"{table}"."{newest}" DESC'), order


def test_each_rows_selection_box_is_djangos_own_markup(db) -> None:
    """The lists write the row's selection box directly (the widget templates were a fifth of a
    page's time); the markup is Django's, escaping included."""
    from django.contrib import admin
    from django.utils import timezone

    from retirements.admin import RetirementRequestAdmin, WorkspaceAdmin
    from retirements.models import Workspace

    case = submit_and_approve('manual:<b>"x" & y</b>')
    space = Workspace.objects.create(slug="a-b", name="x", created_at=timezone.now())
    for model_admin, obj in (
        (DeletionRequestAdmin(type(case), admin.site), case),
        (WorkspaceAdmin(Workspace, admin.site), space),
    ):
        assert model_admin.action_checkbox(obj) == admin.ModelAdmin.action_checkbox(model_admin, obj)
    assert "&lt;b&gt;&quot;x&quot; &amp; y" in DeletionRequestAdmin(type(case), admin.site).action_checkbox(case)
    assert RetirementRequestAdmin.action_checkbox is DeletionRequestAdmin.action_checkbox


@pytest.mark.parametrize("query", ["", "?status__exact=approved", "?status__exact=approved&o=-2&q=demo%3Abig"])
def test_each_rows_link_is_the_one_django_makes(client, five, query: str) -> None:
    """Made once per page (`core.admin.RowLinksOnce`), each row's link is what Django's own
    `url_for_result` and `add_preserved_filters` make: the case page, keeping the list's filters."""
    from django.contrib import admin
    from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
    from django.urls import reverse

    from deletions.models import DeletionRequest

    response = client.get(LIST + query)
    cl = response.context["cl"]
    model_admin = admin.site._registry[DeletionRequest]
    context = {"preserved_filters": model_admin.get_preserved_filters(response.wsgi_request), "opts": cl.opts}
    links = re.findall(r'<th class="field-shown_target"><a href="([^"]+)"', response.content.decode())
    expected = [
        add_preserved_filters(context, reverse("admin:deletions_deletionrequest_change", args=[r.pk]))
        for r in cl.result_list
    ]
    assert len(links) == 5 and [html.unescape(link) for link in links] == expected
    assert ("_changelist_filters=" in expected[0]) == bool(query)


@pytest.mark.django_db(transaction=True)  # the demo's killed worker is a real process
def test_each_lists_cells_are_the_ones_django_writes(client, cmd, monkeypatch, tmp_path) -> None:
    """Written with each column worked out once per page (`core.admin.CellsOnce`), every cell of
    every case list (the demo's cases, filtered, searched, sorted; targets masked for support) is
    what Django's own `items_for_result` writes for it, and the page shows those cells."""
    import time_machine
    from django.contrib.admin.templatetags.admin_list import items_for_result
    from django.utils import timezone

    monkeypatch.setenv("DEMO_TOKEN_DIR", str(tmp_path))
    assert cmd("demo_setup").code == 0
    lists = {
        LIST: ["", "?status__exact=needs_attention", "?o=-3&q=demo", "?view=overdue", "?deadline=later"],
        "/admin/retirements/retirementrequest/": ["", "?status__exact=waiting&o=2"],
        "/admin/retirements/workspace/": ["", "?legal_hold__exact=1", "?q=acme&o=-1"],
    }
    with time_machine.travel(timezone.now(), tick=False):  # relative times read the same in both
        for username in ("demo", "support-1"):  # a superuser, and the demo's read-only support lead
            client.force_login(User.objects.get(username=username))
            compared = 0
            for url, queries in lists.items():
                for query in queries:
                    response = client.get(url + query)
                    assert response.status_code == 200, url + query
                    assert "admin/indexed_change_list.html" in [t.name for t in response.templates]
                    cl = response.context["cl"]
                    page = response.content.decode()
                    ours = list(cl.case_rows())
                    assert ours == [list(items_for_result(cl, row, None)) for row in cl.result_list], url + query
                    assert all(cell in page for row in ours for cell in row), url + query
                    compared += sum(len(row) for row in ours)
            assert compared > 100, compared
    from deletions.models import DeletionRequest

    rows = client.get(LIST).content.decode().split('id="result_list"')[1]  # support-1's: targets masked
    assert "…</a></th>" in rows
    assert not [t for t in DeletionRequest.objects.values_list("target", flat=True) if f">{t}</a>" in rows]


def test_pages_stop_at_the_deepest_offered_and_say_how_to_reach_the_rest(client, five, monkeypatch) -> None:
    """Past DEEPEST rows no page is offered (skipping rows costs reading them): the last page
    offered is the last link, a page past it is refused as Django refuses any page out of range,
    and the list says how to reach the rest."""
    monkeypatch.setattr(DeletionRequestAdmin, "list_per_page", 1)
    monkeypatch.setattr(EstimatedCountPaginator, "DEEPEST", 2)  # pages 1 to 3 offered of 5
    newest_first = list(reversed(five))
    page = client.get(LIST + "?p=3").content.decode()
    assert targets(page) == newest_first[2:3]
    paginator = html.unescape(page).split('class="paginator"')[1].split("</p>")[0]
    assert "?p=3" not in paginator and "?p=2" in paginator and "?p=4" not in paginator  # 3 is this page
    assert "the pages stop at 3: to reach the rest, sort the other way, filter or search" in paginator
    assert client.get(LIST + "?p=4").url == LIST + "?e=1"  # Django's answer to a page out of range
    by_deadline = DeletionRequestAdmin.list_display.index("deadline") + 1  # after the selection boxes
    oldest = client.get(LIST + f"?o={by_deadline}").content.decode()  # the other way round: the oldest first
    assert targets(oldest) == five[:1]
    monkeypatch.setattr(EstimatedCountPaginator, "DEEPEST", 4)
    assert "the pages stop" not in client.get(LIST).content.decode()
