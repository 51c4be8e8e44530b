"""Prometheus metrics, read from the database at each scrape.

The database is the source of truth, so every web process answers the same and nothing is
lost when a worker restarts (no multiprocess collector, no per-process counters). The counts
are tallies the database keeps as things happen (`ops.models.Tally`), never a count of the
tables, so a scrape costs the same at any size; the rest are bounded reads of the cases in
flight and the open deadlines. Served at
`/metrics` with `Authorization: Bearer $METRICS_TOKEN`; without a configured token it is off.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from core import clock
from core.sql import Statements
from deletions import selectors as deletion_selectors
from deletions.models import Status
from ops import saturation
from ops.health import report
from ops.models import NotificationStatus
from retirements.models import NoticeStatus, RequestStatus

SQL = Statements.beside(__file__, "tallies.sql")

Tallies = dict[str, dict[str, tuple[int, float]]]  # metric -> label -> (count, sum)


def read_tallies() -> tuple[Tallies, list[str]]:
    """Fold the events the triggers appended since the last scrape, then read every tally and the
    duration buckets' bounds: three statements, whatever the tables hold."""
    tallies: Tallies = {}
    with transaction.atomic(), connection.cursor() as cur:
        SQL.run(cur, "fold")
        cur.execute(SQL.sql("read"))
        for metric, label, n, total in cur.fetchall():
            tallies.setdefault(metric, {})[label] = (int(n), float(total))
        cur.execute(SQL.sql("duration_buckets"))
        bounds = [row[0] for row in cur.fetchall()]
    return tallies, bounds


def recount_tallies() -> None:
    """Count every tally again from the tables: for a bulk load written with the triggers off
    (the bench's million cases); the triggers keep them from then on."""
    with transaction.atomic(), connection.cursor() as cur:
        SQL.one(cur, "recount")


class DatabaseCollector:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def collect(self) -> Iterator[Any]:
        tallies, bounds = read_tallies()

        def count(metric: str, label: str) -> int:
            return tallies.get(metric, {}).get(label, (0, 0.0))[0]

        outcomes = CounterMetricFamily(
            "backoffice_stage_attempts", "Deletion stage attempts by stage and outcome", labels=["stage", "outcome"]
        )
        for label, (n, _) in sorted(tallies.get("stage_attempts", {}).items()):
            stage, outcome = label.split(":", 1)
            outcomes.add_metric([stage, outcome], n)
        yield outcomes
        yield _durations(tallies.get("stage_duration", {}), bounds)

        by_state = GaugeMetricFamily("backoffice_deletion_requests", "Deletion requests by state", labels=["state"])
        for state in Status.values:
            by_state.add_metric([state], count("deletion_requests", state))
        yield by_state
        retirements = GaugeMetricFamily(
            "backoffice_retirement_requests", "Workspace retirements by state", labels=["state"]
        )
        for state in RequestStatus.values:
            retirements.add_metric([state], count("retirement_requests", state))
        yield retirements

        full = saturation.read(self.now)
        health = report(self.now, full)  # the same two parts `manage.py health` prints
        checks, work = health["checks"], health["work"]
        soon = self.now + timedelta(days=settings.DELETION_DEADLINE_WARNING_DAYS)
        dead = deletion_selectors.deadlines(self.now, soon, 0)
        deadlines = GaugeMetricFamily(
            "backoffice_deletion_deadlines", "Open deletion requests by their legal deadline", labels=["when"]
        )
        deadlines.add_metric(["passed"], work["deadlines_passed"]["count"])
        deadlines.add_metric(["within_warning"], dead["soon"])
        yield deadlines
        notes = GaugeMetricFamily("backoffice_notifications", "Notifications by state", labels=["state"])
        for state in NotificationStatus.values:
            notes.add_metric([state], count("notifications", state))
        yield notes

        yield GaugeMetricFamily(
            "backoffice_stage_workers_busy", "Stage workers holding a live lease now", value=full.busy
        )
        yield GaugeMetricFamily(
            "backoffice_cases_waiting_for_worker", "Deletion cases queued for a free worker", value=len(full.waiting)
        )
        yield GaugeMetricFamily(
            "backoffice_oldest_due_work_seconds",
            "How long the longest-waiting case has waited for a free worker (queue lag)",
            value=full.waited(self.now),
        )
        queued = GaugeMetricFamily(
            "backoffice_queued_runs", "Runs queued at the broker (-1: it did not answer)", labels=["queue"]
        )
        queued.add_metric(["stage"], -1 if full.stage_runs_queued is None else full.stage_runs_queued)
        queued.add_metric(["control"], -1 if full.control_runs_queued is None else full.control_runs_queued)
        yield queued
        yield GaugeMetricFamily(
            "backoffice_healthy",
            "1 when every health check passes (the system), 0 when one fails",
            value=int(health["status"] == "green"),
        )
        failing = GaugeMetricFamily(
            "backoffice_health_check_ok", "Each health check of the system: 1 passes, 0 fails", labels=["check"]
        )
        for name, check in checks.items():
            failing.add_metric([name], int(check["ok"]))
        yield failing
        waiting = GaugeMetricFamily(
            "backoffice_work_waiting", "What people have waiting (never a fault of the system)", labels=["kind"]
        )
        oldest = GaugeMetricFamily(
            "backoffice_work_oldest_seconds", "How long the oldest of each kind of work has waited", labels=["kind"]
        )
        for kind, waits in work.items():
            waiting.add_metric([kind], waits["count"])
            oldest.add_metric([kind], waits.get("oldest_s", 0))
        yield waiting
        yield oldest
        age = checks["cluster"]["age_s"]
        yield GaugeMetricFamily(
            "backoffice_cluster_heartbeat_age_seconds",
            "Seconds since the newest cluster heartbeat (-1: none yet)",
            value=-1 if age is None else age,
        )
        yield GaugeMetricFamily(
            "backoffice_stalled_watchers", "Retirement watchers stalled now", value=checks["stalled_watchers"]["count"]
        )
        yield GaugeMetricFamily(
            "backoffice_failing_watchers",
            "Retirement watchers alive whose steps fail",
            value=checks["failing_watchers"]["count"],
        )
        yield GaugeMetricFamily(
            "backoffice_integrity_faults",
            "Open integrity alarms: records that contradict themselves",
            value=checks["integrity_faults"]["count"],
        )
        yield GaugeMetricFamily(
            "backoffice_failed_notices",
            "Retirement notices that failed all their attempts",
            value=count("notice_slots", NoticeStatus.FAILED),
        )
        refusals = CounterMetricFamily(
            "backoffice_boundary_refusals", "Effects refused at a receiving boundary", labels=["workflow"]
        )
        for workflow in ("deletion", "retirement"):
            refusals.add_metric([workflow], count("boundary_refusals", workflow))
        yield refusals


def _durations(tally: dict[str, tuple[int, float]], bounds: list[str]) -> HistogramMetricFamily:
    """Completed attempts' durations: the tally keeps each bucket's own count (an attempt under
    the first bound it fits), Prometheus wants them cumulative."""
    buckets, running = [], 0
    for bound in [*bounds, "+Inf"]:
        running += tally.get(bound, (0, 0.0))[0]
        buckets.append((bound, running))
    return HistogramMetricFamily(
        "backoffice_stage_duration_seconds",
        "Duration of completed deletion stage attempts",
        buckets=buckets,
        sum_value=sum(total for _, total in tally.values()),
    )


def bearer_matches(request: HttpRequest) -> bool:
    """`Authorization: Bearer <METRICS_TOKEN>`, exactly (a bare token is not accepted)."""
    token = getattr(settings, "METRICS_TOKEN", "")
    header = request.headers.get("Authorization", "")
    if not token or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer ") :].encode(), token.encode())


def metrics_view(request: HttpRequest) -> HttpResponse:
    if not getattr(settings, "METRICS_TOKEN", ""):
        return HttpResponse("metrics are off: set METRICS_TOKEN\n", status=404, content_type="text/plain")
    if not bearer_matches(request):
        return HttpResponse("a valid bearer token is required\n", status=401, content_type="text/plain")
    registry = CollectorRegistry()
    registry.register(DatabaseCollector(clock.now()))  # type: ignore[arg-type]
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
