"""Prometheus metrics, read from the database at each scrape.

The tables are the source of truth, so every web process answers the same and nothing is
lost when a worker restarts (no multiprocess collector, no per-process counters). Served at
`/metrics` with `Authorization: Bearer $METRICS_TOKEN`; without a configured token it is off.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from core import clock
from deletions import selectors as deletion_selectors
from deletions.models import DeletionDecision, DeletionRequest, StageAttempt, Status
from ops import saturation
from ops.models import ClusterHeartbeat, Notification
from retirements.models import Decision as RetirementDecision
from retirements.models import NoticeSlot, NoticeStatus, RequestStatus, RetirementRequest
from retirements.selectors import count_stalls

DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class DatabaseCollector:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def collect(self) -> Iterator[Any]:
        outcomes = CounterMetricFamily(
            "backoffice_stage_attempts", "Deletion stage attempts by stage and outcome", labels=["stage", "outcome"]
        )
        rows = StageAttempt.objects.values("stage__stage", "outcome").annotate(n=Count("id")).order_by()
        for row in rows:
            outcomes.add_metric([row["stage__stage"], row["outcome"]], row["n"])
        yield outcomes
        yield self._durations()

        by_state = GaugeMetricFamily("backoffice_deletion_requests", "Deletion requests by state", labels=["state"])
        counts = dict(DeletionRequest.objects.values_list("status").annotate(n=Count("id")).order_by())
        for state in Status.values:
            by_state.add_metric([state], counts.get(state, 0))
        yield by_state
        retirements = GaugeMetricFamily(
            "backoffice_retirement_requests", "Workspace retirements by state", labels=["state"]
        )
        counts = dict(RetirementRequest.objects.values_list("status").annotate(n=Count("id")).order_by())
        for state in RequestStatus.values:
            retirements.add_metric([state], counts.get(state, 0))
        yield retirements

        soon = self.now + timedelta(days=settings.DELETION_DEADLINE_WARNING_DAYS)
        dead = deletion_selectors.deadlines(self.now, soon, 0)
        deadlines = GaugeMetricFamily(
            "backoffice_deletion_deadlines", "Open deletion requests by their legal deadline", labels=["when"]
        )
        deadlines.add_metric(["passed"], dead["passed"])
        deadlines.add_metric(["within_warning"], dead["soon"])
        yield deadlines
        notes = GaugeMetricFamily("backoffice_notifications", "Notifications by state", labels=["state"])
        for state, n in Notification.objects.values_list("status").annotate(n=Count("id")).order_by():
            notes.add_metric([state], n)
        yield notes

        full = saturation.read(self.now)
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
        beat = ClusterHeartbeat.objects.aggregate(last=Max("seen_at"))["last"]
        yield GaugeMetricFamily(
            "backoffice_cluster_heartbeat_age_seconds",
            "Seconds since the newest cluster heartbeat (-1: none yet)",
            value=(self.now - beat).total_seconds() if beat else -1,
        )
        yield GaugeMetricFamily(
            "backoffice_stalled_watchers", "Retirement watchers stalled now", value=count_stalls(now=self.now)
        )
        yield GaugeMetricFamily(
            "backoffice_failed_notices",
            "Retirement notices that failed all their attempts",
            value=NoticeSlot.objects.filter(status=NoticeStatus.FAILED).count(),
        )
        refusals = CounterMetricFamily(
            "backoffice_boundary_refusals", "Effects refused at a receiving boundary", labels=["workflow"]
        )
        refusals.add_metric(["deletion"], DeletionDecision.objects.filter(action="boundary_refused").count())
        refusals.add_metric(["retirement"], RetirementDecision.objects.filter(action="purge_refused").count())
        yield refusals

    def _durations(self) -> HistogramMetricFamily:
        """Completed attempts' durations, bucketed in SQL (one query)."""
        cases = ", ".join(
            f"COUNT(*) FILTER (WHERE EXTRACT(EPOCH FROM finished_at - started_at) <= {b})" for b in DURATION_BUCKETS
        )
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT {cases}, COUNT(*), COALESCE(SUM(EXTRACT(EPOCH FROM finished_at - started_at)), 0) "
                "FROM entity_deletion_stage_attempts WHERE outcome = 'completed' AND finished_at IS NOT NULL"
            )
            *counts, total, seconds = cur.fetchone()
        buckets = [(str(b), int(n)) for b, n in zip(DURATION_BUCKETS, counts, strict=True)] + [("+Inf", int(total))]
        return HistogramMetricFamily(
            "backoffice_stage_duration_seconds",
            "Duration of completed deletion stage attempts",
            buckets=buckets,
            sum_value=float(seconds),
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
