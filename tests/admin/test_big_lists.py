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
