"""The console and the watcher at scale: 100k deletion requests (with their stage rows) and
100k waiting retirements (with watcher and notice slots).

One case of each is built through the real commands and services (submit, approve, run;
create a workspace, request its retirement); the rest are SQL copies of those rows with new
ids, targets, slugs and times (building 100k cases through the services would take an hour).
Pages are fetched in-process with Django's test client as a superuser; each page's SELECTs
are collected by `connection.execute_wrapper`, counted, and EXPLAINed for sequential scans of
the big tables.
"""

from __future__ import annotations

import re
import statistics
import time
import urllib.parse
import uuid
from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from typing import Any

from django.core.management import call_command
from django.db import connection, transaction
from django.test import Client

from tests.support import clone_rows

BIG_TABLES = (
    "entity_deletion_requests",
    "entity_deletion_stage_attempts",
    "entity_deletion_decisions",
    "entity_deletion_stage_history",
    "retirements_retirementrequest",
    "retirements_workspace",
    "retirements_retirementwatcher",
    "retirements_noticeslot",
)


def build(n: int) -> dict[str, Any]:
    from bench.floor import approved
    from deletions import worker
    from deletions.models import DeletionRequest

    template = DeletionRequest.objects.get(id=approved([f"demo:console-{uuid.uuid4().hex[:8]}"])[0])
    worker.run(template.id, executor_id="bench-console")
    user = _superuser()
    slug = f"console-{uuid.uuid4().hex[:8]}"
    call_command("create_workspace", "--slug", slug, "--name", "Console template", "--disabled", stdout=StringIO())
    out = StringIO()
    from tests.conftest import with_token

    asked = ("--workspace", slug, "--requested-by", user.username, "--reason", "bench", "--confirm", slug)
    call_command("request_retirement", *with_token(asked), stdout=out)
    from retirements.models import RetirementRequest

    retirement = RetirementRequest.objects.get(workspace__slug=slug)
    rid, wid = str(template.id), str(retirement.id)
    req_id = "md5(g::text || 'req' || t.id::text)::uuid"
    with transaction.atomic():
        with connection.cursor() as cur:  # the build's statements are big; the project's timeout is for pages
            cur.execute("SET LOCAL statement_timeout = 0")
            # Bench data, not workflow moves: copies of rows the services made, with the row
            # triggers off for the load (lifecycle guards, set-once evidence, tallies, the
            # webhook outbox); the tallies are counted again from the tables afterwards.
            cur.execute("SET LOCAL session_replication_role = replica")
        status = (
            "CASE WHEN g %% 50 = 0 THEN 'submitted' WHEN g %% 50 = 1 THEN 'needs_attention'"
            " WHEN g %% 25 = 2 THEN 'cancelled' ELSE 'completed' END"
        )
        clone_rows(
            "entity_deletion_requests",
            "t.id = %s",
            n,
            {
                "id": req_id,
                "target": "t.target || '-' || g",
                "status": status,
                "created_at": "t.created_at - g * interval '37 seconds'",
                "updated_at": "t.updated_at - g * interval '37 seconds'",
                # a case waiting on people has a next check (a check constraint)
                "next_check_at": "CASE WHEN g %% 50 IN (0, 1) THEN now() + interval '1 hour' END",
            },
            [rid],
        )
        clone_rows(
            "entity_deletion_stage_history",
            "t.request_id = %s",
            n,
            {
                "id": "md5(g::text || 'stage' || t.id::text)::uuid",
                "request_id": f"md5(g::text || 'req' || '{rid}')::uuid",
                "operation_id": "md5(g::text || 'op' || t.operation_id::text)::uuid",
            },
            [rid],
        )
        clone_rows(  # each copy's stage attempts, on its own stage rows
            "entity_deletion_stage_attempts",
            "t.request_id = %s",
            n,
            {
                "request_id": f"md5(g::text || 'req' || '{rid}')::uuid",
                "stage_id": "md5(g::text || 'stage' || t.stage_id::text)::uuid",
            },
            [rid],
            skip=("id",),
        )
        clone_rows(  # each copy's decisions, the submitter's reason naming its own ticket
            "entity_deletion_decisions",
            "t.request_id = %s",
            n,
            {
                "request_id": f"md5(g::text || 'req' || '{rid}')::uuid",
                "reason": "CASE WHEN t.action = 'submit' THEN 'erasure request, ticket DSR-' || g ELSE t.reason END",
            },
            [rid],
            skip=("id",),
        )
        clone_rows(
            "retirements_workspace",
            "t.slug = %s",
            n,
            {"slug": "t.slug || '-' || g", "name": "'Workspace ' || g || ' ' || md5(g::text)"},
            [slug],
            skip=("id",),
        )
        ws = "(SELECT w.id FROM retirements_workspace w WHERE w.slug = %s || '-' || g)"
        clone_rows(
            "retirements_retirementrequest",
            "t.id = %s",
            n,
            {
                "id": "md5(g::text || 'ret' || t.id::text)::uuid",
                "workspace_id": ws,
                "watcher_id": "md5(g::text || 'watcher' || t.id::text)::uuid",
                "requested_at": "t.requested_at - g * interval '41 seconds'",
                "next_wake_at": "now() + (1 + g %% 20) * interval '1 day'",
            },
            [slug, wid],
        )
        clone_rows(
            "retirements_retirementwatcher",
            "t.request_id = %s",
            n,
            {
                "id": f"md5(g::text || 'watcher' || '{wid}')::uuid",
                "request_id": f"md5(g::text || 'ret' || '{wid}')::uuid",
                "started_at": "t.created_at",
                "heartbeat_at": "t.created_at",
                "status": "'running'",
            },
            [wid],
        )
        clone_rows(
            "retirements_noticeslot",
            "t.request_id = %s",
            n,
            {"request_id": f"md5(g::text || 'ret' || '{wid}')::uuid", "status": "'delivered'"},
            [wid],
            skip=("id",),
        )
    from ops.metrics import recount_tallies

    with transaction.atomic(), connection.cursor() as cur:  # millions of rows: no page's timeout either
        cur.execute("SET LOCAL statement_timeout = 0")
        recount_tallies()
    with connection.cursor() as cur:
        for table in BIG_TABLES:  # as autovacuum leaves a table that has stood a while: statistics, visibility map
            cur.execute(f"VACUUM (ANALYZE) {table}")
        cur.execute("SELECT count(*) FROM entity_deletion_stage_history")
        stage_rows = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM entity_deletion_stage_attempts")
        attempts = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM retirements_noticeslot")
        slots = cur.fetchone()[0]
    return {
        "n": n,
        "deletion": rid,
        "retirement": wid,
        "workspace": slug,
        "stage_rows": stage_rows,
        "attempts": attempts,
        "slots": slots,
        "user": user,
    }


def _superuser() -> Any:
    from django.contrib.auth.models import User

    user, _ = User.objects.get_or_create(
        username="bench-hq", defaults={"is_staff": True, "is_superuser": True, "email": "hq@bench.example"}
    )
    return user


def _seq_scans(statements: list[tuple[str, Any]]) -> list[str]:
    found = []
    with connection.cursor() as cur:
        for sql, params in statements:
            if not sql.lstrip().upper().startswith("SELECT"):
                continue
            cur.execute("EXPLAIN " + sql, params)
            plan = "\n".join(r[0] for r in cur.fetchall())
            found += [t for t in BIG_TABLES if re.search(rf"Seq Scan on {t}\b", plan)]
    return sorted(set(found))


def measure(fetch: Callable[[], Any], runs: int = 3) -> dict[str, Any]:
    seen: list[tuple[str, Any]] = []

    def collect(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append((sql, params))
        return execute(sql, params, many, context)

    fetch()  # warm
    times = []
    for _ in range(runs):
        seen.clear()
        with connection.execute_wrapper(collect):
            start = time.perf_counter()
            fetch()
            times.append(time.perf_counter() - start)
    return {
        "ms": statistics.median(times) * 1000,
        "min_ms": min(times) * 1000,
        "max_ms": max(times) * 1000,
        "queries": len(seen),
        "seq_scans": _seq_scans(seen),
    }


def pages(built: dict[str, Any], *, every: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """The console's pages over the built data. `every`: also every sort each case list offers
    (both directions) and every choice of each of its filters, read from the admin itself."""
    client = Client()
    client.force_login(built["user"])
    metrics_token = "bench-metrics-token-0123456789abcdef"

    def get(url: str, headers: dict[str, str] | None = None) -> Callable[[], Any]:
        def fetch() -> Any:
            response = client.get(url, headers=headers or {})
            if response.status_code != 200:
                raise RuntimeError(f"{url} answered HTTP {response.status_code}")
            return response

        return fetch

    from core.admin import EstimatedCountPaginator
    from deletions.admin import DeletionRequestAdmin
    from retirements.admin import RetirementRequestAdmin, WorkspaceAdmin

    def deepest(model_admin: Any) -> int:
        """The last page the list offers over the built rows (`EstimatedCountPaginator.DEEPEST`):
        page 2,000 at 100k, 5,001 (250,000 rows in) at 1M."""
        per_page = model_admin.list_per_page
        return min(-(-built["n"] // per_page), EstimatedCountPaginator.DEEPEST // per_page + 1)

    deep = deepest(DeletionRequestAdmin)
    assert deep == deepest(RetirementRequestAdmin) == deepest(WorkspaceAdmin)
    deletions = "/admin/deletions/deletionrequest/"
    retirements = "/admin/retirements/retirementrequest/"
    workspaces = "/admin/retirements/workspace/"
    urls = [
        ("deletions: first page", deletions),
        ("deletions: status filter", deletions + "?status__exact=needs_attention"),
        ("deletions: submitted this month", deletions + "?created_at__gte=" + _month_start()),
        ("deletions: search", deletions + "?q=4567"),
        ("deletions: search by ticket", deletions + "?q=DSR-45678"),
        ("deletions: search by id prefix", deletions + "?q=" + built["deletion"][:6]),
        (f"deletions: page {deep}, the deepest offered", deletions + f"?p={deep}"),
        (
            f"deletions: page {deep} by next check",
            deletions + f"?o={_column(DeletionRequestAdmin, 'next_check')}&p={deep}",
        ),
        ("deletions: case page", f"{deletions}{built['deletion']}/change/"),
        ("retirements: first page", retirements),
        ("retirements: status filter", retirements + "?status__exact=held"),
        ("retirements: search", retirements + "?q=4567"),
        (f"retirements: page {deep}, the deepest offered", retirements + f"?p={deep}"),
        ("retirements: case page", f"{retirements}{built['retirement']}/change/"),
        ("workspaces: first page", workspaces),
        ("workspaces: search", workspaces + "?q=4567"),
        (f"workspaces: page {deep}, the deepest offered", workspaces + f"?p={deep}"),
        ("deletions: one-letter search", deletions + "?q=4"),
        ("deletions: two-letter search", deletions + "?q=45"),
        ("retirements: two-letter search", retirements + "?q=45"),
        ("workspaces: two-letter search", workspaces + "?q=45"),
        ("deletions: by next check", deletions + f"?o={_column(DeletionRequestAdmin, 'next_check')}"),
        ("retirements: by eligible", retirements + f"?o={_column(RetirementRequestAdmin, 'eligible')}"),
        ("retirements: by next check", retirements + f"?o={_column(RetirementRequestAdmin, 'next_check')}"),
        ("workspaces: lifecycle filter", workspaces + "?lifecycle__exact=disabled"),
        ("workspaces: legal-hold filter", workspaces + "?legal_hold__exact=1"),
        ("workspaces: by lifecycle", workspaces + f"?o={_column(WorkspaceAdmin, 'state')}"),
        ("operations overview", "/admin/operations/"),
        ("/healthz", "/healthz"),
    ]
    if every:
        urls += _every_sort_and_filter(built["user"])
    measured = []
    from django.test import override_settings

    with override_settings(METRICS_TOKEN=metrics_token):
        for name, url in [*urls, ("/metrics", "/metrics")]:
            headers = {"Authorization": f"Bearer {metrics_token}"} if url == "/metrics" else None
            try:
                measured.append((name, measure(get(url, headers))))
            except RuntimeError as exc:  # reported in the table, never hidden
                measured.append((name, {"ms": float("nan"), "queries": 0, "seq_scans": [], "error": str(exc)}))
    return measured


def _every_sort_and_filter(user: Any) -> list[tuple[str, str]]:
    """Each case list's sorts (every sortable column, both ways) and filter choices, as its
    changelist offers them to this user."""
    from django.contrib import admin
    from django.test import RequestFactory

    from deletions.models import DeletionRequest
    from retirements.models import RetirementRequest, Workspace

    urls = []
    for label, model in (("deletions", DeletionRequest), ("retirements", RetirementRequest), ("workspaces", Workspace)):
        base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        request = RequestFactory().get(base)
        request.user = user
        model_admin = admin.site._registry[model]
        changelist = model_admin.get_changelist_instance(request)
        sortable = model_admin.get_sortable_by(request)
        for i, column in enumerate(changelist.list_display):
            if column != "action_checkbox" and column in sortable and changelist.get_ordering_field(column):
                urls += [
                    (f"{label}: sort {column}", f"{base}?o={i}"),
                    (f"{label}: sort {column} desc", f"{base}?o=-{i}"),
                ]
        specs = changelist.get_filters(request)[0]
        for spec in specs:
            for choice in spec.choices(changelist):
                if not choice.get("selected") and choice["query_string"] not in ("?", ""):
                    urls.append((f"{label}: filter {spec.title} = {choice['display']}", base + choice["query_string"]))
    return urls


def _column(model_admin: Any, name: str) -> int:
    """The admin's sort parameter (`?o=N`) for a column of its list: its place in the list as the
    admin shows it (with a checkbox column first only when the list has bulk actions)."""
    from django.contrib import admin

    registered = next(a for a in admin.site._registry.values() if type(a) is model_admin)
    shown = registered.get_actions(_request())
    return list(model_admin.list_display).index(name) + (1 if shown else 0)


def _request() -> Any:
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/")
    request.user = _superuser()
    return request


def _month_start() -> str:
    from django.utils import timezone

    start = timezone.now().replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return urllib.parse.quote(start.isoformat())


def watcher(due: int) -> dict[str, Any]:
    """An idle tick over 100k waiting requests, then `due` requests due at once (each with a
    notice due): the ticks it takes and their time."""
    from django.utils import timezone

    from retirements import watcher as retirement_watcher

    now = timezone.now()
    idle = measure(lambda: retirement_watcher.run_due(now=now), runs=5)
    with connection.cursor() as cur:
        cur.execute(
            "WITH chosen AS (SELECT id FROM retirements_retirementrequest WHERE status = 'waiting'"
            " AND next_wake_at > now() ORDER BY id LIMIT %s)"
            " UPDATE retirements_retirementrequest r SET next_wake_at = %s FROM chosen WHERE r.id = chosen.id",
            [due, now - timedelta(minutes=1)],
        )
        # Bench data, not a workflow move: one notice of each chosen case made due again, with the
        # lifecycle guards off for this one statement (a delivered notice never goes back to pending).
        cur.execute("SET session_replication_role = replica")
        cur.execute(
            "UPDATE retirements_noticeslot s SET status = 'pending', due_at = %s, attempts = 0"
            " WHERE s.id IN (SELECT min(n.id) FROM retirements_noticeslot n JOIN retirements_retirementrequest r"
            " ON r.id = n.request_id WHERE r.next_wake_at = %s GROUP BY n.request_id)",
            [now - timedelta(minutes=1), now - timedelta(minutes=1)],
        )
        cur.execute("SET session_replication_role = origin")
    from django.core import mail

    mail.outbox = []
    start, ticks, steps = time.perf_counter(), 0, 0
    while True:
        summary = retirement_watcher.run_due(now=now)
        ticks += 1
        steps += len(summary["steps"])
        if not summary["steps"] or ticks > 1000:
            break
    elapsed = time.perf_counter() - start
    return {
        "idle_ms": idle["ms"],
        "idle_queries": idle["queries"],
        "due": due,
        "steps": steps,
        "ticks": ticks,
        "seconds": elapsed,
        "notices": len(mail.outbox),
    }
