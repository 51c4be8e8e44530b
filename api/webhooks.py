"""Webhooks for intake systems: each state change of a case is POSTed to every active subscriber.

The database writes the deliveries (a trigger on the case tables, `api/migrations/0002`), in the
transaction of the change. `send_due` (the schedule "api: send webhooks", each minute) claims the
due ones, POSTs each with no transaction open, and saves the outcome: sent at least once, retried
with backoff (1 minute doubling to 1 hour, 8 attempts), and a sender that dies between the POST
and saving it leaves a claim that runs out, so the delivery is sent again. The subscriber drops a
repeat by its `X-Backoffice-Delivery` id.

Each POST carries `X-Backoffice-Signature: t=<unix time>,v1=<hex>`, the HMAC-SHA256 of
`<t>.<body>` under the subscriber's secret, so a subscriber can tell our deliveries from forgeries
and refuse old replays.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import urllib.error
import urllib.request
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from api.models import WebhookDelivery
from core import clock
from core.backoff import delay
from core.sql import Statements

SQL = Statements.beside(__file__, "store.sql")
MAX_ATTEMPTS = 8
FIRST, CAP = timedelta(minutes=1), timedelta(hours=1)
CLAIM = timedelta(minutes=2)
LIMIT = 100
SIGNATURE, DELIVERY, EVENT = "X-Backoffice-Signature", "X-Backoffice-Delivery", "X-Backoffice-Event"


def signature(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify(secret: str, header: str, body: bytes, *, now: int, tolerance: int = 300) -> bool:
    """What a subscriber checks (and our tests do): the signature is ours and recent."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        timestamp = int(parts.get("t", ""))
    except ValueError:
        return False
    return abs(now - timestamp) <= tolerance and hmac.compare_digest(signature(secret, timestamp, body), header)


def _post(delivery: WebhookDelivery, now: datetime) -> tuple[int | None, str]:
    """One POST; the subscriber's status (None when there was no answer) and what went wrong."""
    body = json.dumps(delivery.payload, sort_keys=True).encode()
    request = urllib.request.Request(
        delivery.subscriber.url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "deletion-back-office-webhooks/1",
            DELIVERY: str(delivery.id),
            EVENT: delivery.event,
            SIGNATURE: signature(delivery.subscriber.secret, int(now.timestamp()), body),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=settings.WEBHOOK_TIMEOUT_SECONDS) as answer:
            return answer.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, f"the subscriber answered {exc.code}"
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        return None, f"no answer: {getattr(exc, 'reason', exc)}"[:500]


def send_due(now: datetime | None = None, *, limit: int = LIMIT) -> dict[str, int]:
    now = now or clock.now()
    me = f"{socket.gethostname()}:{uuid.uuid4().hex[:8]}"
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(SQL.sql("claim_deliveries"), {"by": me, "until": now + CLAIM, "now": now, "limit": limit})
        ids = [row[0] for row in cur.fetchall()]
    counts = {"delivered": 0, "retrying": 0, "failed": 0}
    for delivery in WebhookDelivery.objects.filter(id__in=ids).select_related("subscriber").order_by("created_at"):
        code, error = _post(delivery, clock.now())
        with connection.cursor() as cur:
            if code is not None and 200 <= code < 300:
                SQL.one(cur, "delivered", id=delivery.id, by=me, now=clock.now(), code=code)
                counts["delivered"] += 1
                continue
            give_up = delivery.attempts >= MAX_ATTEMPTS
            retry_at = clock.now() + delay(delivery.attempts, first=FIRST, cap=CAP)
            SQL.one(
                cur, "not_delivered", id=delivery.id, by=me, give_up=give_up, retry_at=retry_at, code=code, error=error
            )
            counts["failed" if give_up else "retrying"] += 1
    return counts
