"""Webhooks: every state change of a case POSTed to each active subscriber, signed, with a
delivery id, retried with backoff until the subscriber says 2xx; the log is in the admin."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from api import webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from core import clock
from tests.conftest import submit_and_approve
from tests.support import force

SECRET = "shared-secret-of-the-portal"


class Receiver:
    """A subscriber's endpoint, a real HTTP server: it records what it got and answers with the
    next status from `answers` (then 200), remembering delivery ids as a careful subscriber does."""

    def __init__(self) -> None:
        self.got: list[dict[str, Any]] = []
        self.answers: list[int] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.got.append({"headers": dict(self.headers), "body": body})
                self.send_response(receiver.answers.pop(0) if receiver.answers else 200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def subscriber(db, receiver) -> WebhookSubscriber:
    return WebhookSubscriber.objects.create(name="portal", url=receiver.url, secret=SECRET, created_at=clock.now())


def test_each_state_change_is_one_signed_delivery(subscriber, receiver) -> None:
    req = submit_and_approve("demo:hook-alice")
    made = list(WebhookDelivery.objects.order_by("created_at").values_list("event", "payload"))
    assert [e for e, _ in made] == ["deletion.submitted", "deletion.approved"]
    assert made[1][1]["from"] == "submitted" and made[1][1]["to"] == "approved"
    assert made[1][1]["case_id"] == str(req.id)
    assert webhooks.send_due() == {"delivered": 2, "retrying": 0, "failed": 0}
    assert len(receiver.got) == 2
    for got in receiver.got:
        body, headers = got["body"], got["headers"]
        assert webhooks.verify(SECRET, headers["X-Backoffice-Signature"], body, now=int(time.time()))
        assert not webhooks.verify("another secret", headers["X-Backoffice-Signature"], body, now=int(time.time()))
        assert json.loads(body)["delivery_id"] == headers["X-Backoffice-Delivery"]
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {"delivered"}
    assert webhooks.send_due() == {"delivered": 0, "retrying": 0, "failed": 0}  # nothing twice


def test_a_failing_subscriber_gets_it_again_with_backoff_and_the_same_id(subscriber, receiver) -> None:
    submit_and_approve("demo:hook-bob")
    WebhookDelivery.objects.exclude(event="deletion.approved").delete()
    receiver.answers = [500, 503]
    assert webhooks.send_due()["retrying"] == 1
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == "pending" and delivery.last_status == 500 and delivery.attempts == 1
    assert webhooks.send_due()["retrying"] == 0  # not due before its backoff
    with time_machine.travel(timezone.now() + timedelta(minutes=1, seconds=5), tick=False):
        assert webhooks.send_due()["retrying"] == 1
    with time_machine.travel(timezone.now() + timedelta(minutes=4), tick=False):
        assert webhooks.send_due()["delivered"] == 1
    ids = {got["headers"]["X-Backoffice-Delivery"] for got in receiver.got}
    assert len(receiver.got) == 3 and ids == {str(delivery.id)}  # one id: the subscriber drops repeats


def test_a_subscriber_that_never_answers_is_given_up_after_the_last_attempt(subscriber, receiver) -> None:
    submit_and_approve("demo:hook-carol")
    WebhookDelivery.objects.exclude(event="deletion.approved").delete()
    subscriber.url = "http://127.0.0.1:9/nothing-listens"
    subscriber.save()
    now = timezone.now()
    for _ in range(webhooks.MAX_ATTEMPTS):
        with time_machine.travel(now, tick=False):
            webhooks.send_due()
        now += webhooks.CAP + timedelta(minutes=1)
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == "failed" and delivery.attempts == webhooks.MAX_ATTEMPTS
    assert "no answer" in delivery.last_error


def test_a_sender_that_died_after_claiming_leaves_it_to_the_next(subscriber, receiver) -> None:
    submit_and_approve("demo:hook-dave")
    WebhookDelivery.objects.exclude(event="deletion.approved").delete()
    force(WebhookDelivery.objects.all(), status="sending", claimed_by="dead", claim_expires_at=clock.now())
    assert webhooks.send_due()["delivered"] == 1


def test_retirements_and_an_inactive_subscriber(db, subscriber, receiver) -> None:
    from core.authority import Actor
    from retirements.models import Lifecycle, Workspace
    from retirements.services import retirement_hold, retirement_request

    WebhookSubscriber.objects.create(name="off", url=receiver.url, secret="s", active=False, created_at=clock.now())
    staff = User.objects.create_user("hq-hook", is_staff=True, is_superuser=True)
    Workspace.objects.create(slug="hook-ws", name="H", lifecycle=Lifecycle.DISABLED, created_at=clock.now())
    req = retirement_request(actor=Actor.of(staff), slug="hook-ws", reason="r", confirmation="hook-ws")
    retirement_hold(actor=Actor.of(staff), request_id=req.id, reason="wait")
    assert list(WebhookDelivery.objects.order_by("created_at").values_list("subscriber__name", "event")) == [
        ("portal", "retirement.waiting"),
        ("portal", "retirement.held"),
    ]


def test_the_delivery_log_is_in_the_admin(subscriber, receiver) -> None:
    submit_and_approve("demo:hook-erin")
    webhooks.send_due()
    client = Client()
    client.force_login(User.objects.create_superuser("root-hook", "r@x", "pw"))
    page = client.get("/admin/api/webhookdelivery/")
    assert page.status_code == 200 and b"deletion.approved" in page.content and b"delivered" in page.content
    assert client.get("/admin/api/webhookdelivery/?status__exact=failed").status_code == 200


def test_retention_forgets_old_deliveries_and_idempotency_keys(subscriber, receiver) -> None:
    from api.models import IdempotencyKey
    from ops import retention

    submit_and_approve("demo:hook-old")
    webhooks.send_due()
    long_ago = clock.now() - timedelta(days=400)
    force(WebhookDelivery.objects.all(), created_at=long_ago)  # planted: a delivered one is never rewritten
    user = User.objects.get(username="operator-a")
    IdempotencyKey.objects.create(user=user, key="old", fingerprint="f", created_at=clock.now() - timedelta(days=2))
    IdempotencyKey.objects.create(user=user, key="new", fingerprint="f", created_at=clock.now())
    counts = retention.run().counts
    assert counts["webhook deliveries deleted"] == 2 and counts["idempotency keys deleted"] == 1
    assert not WebhookDelivery.objects.exists()
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["new"]
