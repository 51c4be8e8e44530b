"""A search reads each of its ways through that way's own index whatever plan PostgreSQL picks.

A query a connection has run five times is prepared (`prepare_threshold`), and a prepared
statement may get a generic plan, made without the parameters. A way read in the list's order
then walks the list's ordering index over every row to find a handful of matches: the id-prefix
search swung from 0.2 ms to 800 ms at a million requests. Here each way's query the page ran is
planned generically, as a prepared statement would be, and its plan is read.
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.urls import reverse

from core.admin import CaseAdmin
from core.authority import named
from deletions.services import deletion_submit


def _ways(client: Any, term: str) -> list[tuple[str, Any]]:
    """The search's own reads (each capped one past SEARCH_LIMIT) the list page ran for `term`."""
    seen: list[tuple[str, Any]] = []

    def collect(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(collect):
        page = client.get(reverse("admin:deletions_deletionrequest_changelist"), {"q": term})
    assert page.status_code == 200
    return [(sql, params) for sql, params in seen if f"LIMIT {CaseAdmin.SEARCH_LIMIT + 1}" in sql]


def _generic_plan(sql: str, params: Any) -> str:
    numbered = sql
    for i in range(1, len(params) + 1):
        numbered = numbered.replace("%s", f"${i}", 1)
    with connection.cursor() as cur:
        cur.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        # Sorts made dear: the index that gives the order is taken whenever one exists, whatever
        # the tiny table's statistics and size left by earlier tests (a Sort left means none does).
        cur.execute("SET LOCAL enable_sort = off")
        cur.execute(f"PREPARE search_way AS {numbered}")
        try:
            values = ", ".join(["%s"] * len(params))  # inlined: EXPLAIN EXECUTE takes no bound parameters
            cur.execute(connection.ops.compose_sql(f"EXPLAIN EXECUTE search_way({values})", list(params)))  # type: ignore[attr-defined]
            return "\n".join(row[0] for row in cur.fetchall())
        finally:
            cur.execute("DEALLOCATE search_way")
            cur.execute("SET LOCAL enable_sort = on")


def test_each_way_of_a_search_keeps_to_its_own_index_under_a_generic_plan(login) -> None:
    case = deletion_submit(target="demo:plan-check", actor=named("operator-1"), reason="ticket DSR-9")
    ways = _ways(login("operator"), str(case.id)[:8])
    by_id = [(sql, params) for sql, params in ways if '"id" >= %s' in sql]
    assert len(by_id) == 1 and len(ways) == 3  # the id range, the decisions' words, the search fields
    plan = _generic_plan(*by_id[0])
    assert "entity_deletion_requests_pkey" in plan and "Sort" not in plan, plan
    for sql, _ in ways:  # none is read in the list's order (that would walk its ordering index)
        assert '"created_at" DESC' not in sql, sql


def test_a_search_run_again_and_again_is_never_planned_without_its_term(login) -> None:
    """Twelve searches on one connection: psycopg prepares each way's query after five, and none
    of them is ever run with a generic plan (`pg_prepared_statements` counts the plans used)."""
    deletion_submit(target="demo:plan-again", actor=named("operator-1"), reason="ticket DSR-10")
    client = login("operator")
    for n in range(12):
        assert len(_ways(client, f"{n % 10}abc")) == 3
    with connection.cursor() as cur:
        cur.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE %s OR statement LIKE %s",
            ["%LIKE UPPER%", '%"id" >= $1%'],
        )
        prepared = cur.fetchall()
    assert prepared, "the ways were never prepared: the test would show nothing"
    assert all(generic == 0 and custom > 0 for _, generic, custom in prepared), prepared


def test_a_term_matching_more_than_the_limit_says_to_type_more(login, monkeypatch) -> None:
    from deletions.admin import DeletionRequestAdmin
    from tests.admin.conftest import messages_of

    cases = [deletion_submit(target=f"demo:capped-{n}", actor=named("operator-1")) for n in range(3)]
    monkeypatch.setattr(DeletionRequestAdmin, "SEARCH_LIMIT", 2)
    client = login("operator")
    page = client.get(reverse("admin:deletions_deletionrequest_changelist"), {"q": "capped"})
    listed = [c for c in cases if f"/{c.id}/change/" in page.content.decode()]
    assert len(listed) == 2
    assert messages_of(page) == [
        "Over 2 deletion requests match 'capped': the list shows only some of them. "
        "Type more of it to narrow the search."
    ]
    monkeypatch.setattr(DeletionRequestAdmin, "SEARCH_LIMIT", 3)  # exactly the limit: all of them, no message
    page = client.get(reverse("admin:deletions_deletionrequest_changelist"), {"q": "capped"})
    assert all(f"/{c.id}/change/" in page.content.decode() for c in cases) and not messages_of(page)
    page = client.get(reverse("admin:deletions_deletionrequest_changelist"), {"q": "capped-1"})
    assert [c for c in cases if f"/{c.id}/change/" in page.content.decode()] == [cases[1]] and not messages_of(page)


def test_a_masked_readers_search_reads_the_targets_trigram_index(login) -> None:
    """Support's search by the masked form (`core.access.mask_pattern`) is a regular expression over
    the upper-cased target, planned for its term (`planned_for_its_values`): the same trigram index
    the others' search of the target reads."""
    deletion_submit(target="demo:plan-masked", actor=named("operator-1"), reason="ticket DSR-11")
    ways = [(sql, params) for sql, params in _ways(login("support"), "demo:pl…ed") if "~" in sql]
    assert len(ways) == 1, ways
    sql, params = ways[0]
    with connection.cursor() as cur:
        cur.execute("SET LOCAL enable_seqscan = off")  # the tiny table's statistics aside: an index that serves it
        cur.execute(connection.ops.compose_sql("EXPLAIN " + sql, list(params)))  # type: ignore[attr-defined]
        plan = "\n".join(row[0] for row in cur.fetchall())
        cur.execute("SET LOCAL enable_seqscan = on")
    assert "deletion_target_trgm" in plan and "Disabled" not in plan, plan
