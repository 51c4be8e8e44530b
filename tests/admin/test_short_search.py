"""A one- or two-letter search says to type more and reads no table for it; three letters search."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

LISTS = [
    "/admin/deletions/deletionrequest/",
    "/admin/retirements/retirementrequest/",
    "/admin/retirements/workspace/",
]


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("term", ["a", "ab", " x "])
def test_a_short_search_gives_a_message_not_a_scan(login, path: str, term: str) -> None:
    client = login("operator")
    with CaptureQueriesContext(connection) as seen:
        page = client.get(path, {"q": term})
    assert page.status_code == 200
    assert any("Type at least 3 characters to search" in str(m) for m in page.context["messages"])
    assert not [q["sql"] for q in seen.captured_queries if "LIKE" in q["sql"].upper()]


@pytest.mark.parametrize("path", LISTS)
def test_three_characters_search(login, path: str) -> None:
    client = login("operator")
    with CaptureQueriesContext(connection) as seen:
        page = client.get(path, {"q": "abc"})
    assert page.status_code == 200 and not list(page.context["messages"])
    assert [q["sql"] for q in seen.captured_queries if "LIKE" in q["sql"].upper()]
