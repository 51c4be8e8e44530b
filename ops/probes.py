"""The probes: `/healthz` for a load balancer and `/metrics` for Prometheus, answered before the
host check and the SSL redirect. They read the one health report (`ops.health`) and the metrics
(`ops.metrics`); neither of those knows about requests arriving here.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user
from django.db import connection
from django.http import HttpRequest, JsonResponse

from core import clock
from ops.health import report
from ops.metrics import bearer_matches, metrics_view


def _reachable() -> bool:
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
        return True
    except Exception:  # any driver error means unreachable here
        return False


def _staff_session(request: HttpRequest) -> bool:
    """Whether the request carries an active staff login (this answers before the session and
    authentication middleware, so it reads the session itself)."""
    key = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
    if not key:
        return False
    try:
        request.session = import_module(settings.SESSION_ENGINE).SessionStore(key)
        user = get_user(request)
    except Exception:  # the database is away: nobody can be told more than that
        return False
    return bool(user.is_active and user.is_staff)


def may_read_report(request: HttpRequest) -> bool:
    """The full report is for staff and for whoever holds the metrics token."""
    return bearer_matches(request) or _staff_session(request)


def healthz(request: HttpRequest) -> JsonResponse:
    """For a load balancer: 503 only when this instance cannot reach its database, and the body
    says only that. Staff (logged in) and the metrics token get the full operations report."""
    if not may_read_report(request):
        up = _reachable()
        return JsonResponse({"status": "ok" if up else "unavailable"}, status=200 if up else 503)
    data = report(clock.now())
    return JsonResponse(data, status=200 if data["checks"]["database"]["ok"] else 503)


class ProbeMiddleware:
    """`/healthz` (and the token-protected `/metrics`) answer before the host check and the
    SSL redirect: a load balancer or Prometheus reaches an instance by its address over plain
    http on the private network, and must get 200/503, never 400 or 301."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> Any:
        if request.path == "/healthz":
            return healthz(request)
        if request.path == "/metrics":
            return metrics_view(request)
        return self.get_response(request)
