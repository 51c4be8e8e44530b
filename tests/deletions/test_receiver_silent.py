"""A receiver that does not answer is a fact on every face (issue 50, item 8): with the reference
receiver stopped (its own process, as in production), a worker that cannot read its fence logs it and
notes since when; the case page, `health` (the `receivers` check) and the operations overview name it,
since then; approving says it did not answer, never that the person's data changed. Started again, each
face says it answers and the cases go on."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from core import clock, present
from core.authority import named
from core.errors import Refused
from core.logs import JsonFormatter
from deletions.models import DeletionRequest, TargetSystem
from deletions.services import deletion_approve, deletion_submit
from deletions.targets import http
from ops.health import report
from tests import target as demo
from tests.conftest import submit_and_approve
from tests.receiver import conftest as receivers
from tests.receiver.conftest import Receiver

pytestmark = pytest.mark.django_db(transaction=True)
receiver = receivers.receiver  # the fixture: a receiver process on a free port, registered for demo:


def test_a_stopped_receiver_is_named_on_the_case_page_in_health_the_overview_and_the_log(
    cmd, client, caplog, receiver: Receiver
) -> None:
    for person in ("demo:silent-run", "demo:silent-approve"):  # in the demo application the process serves
        demo.enroll(person)
    waiting = submit_and_approve("demo:silent-run")
    to_approve = deletion_submit(target="demo:silent-approve", actor=named("operator-a"), reason="silent")
    receiver.stop()
    http._reached.clear()  # health's last discovery in this process, when the receiver answered
    where = f"demo target system at {receiver.url}"

    with caplog.at_level(logging.INFO, logger="deletions"):
        ran = cmd("run_deletion", str(waiting.id))
    assert ran.code == 1 and "nothing was claimed or sent" in ran.err, ran.err
    since = TargetSystem.objects.get(prefix="demo:").unanswered_since
    assert since is not None
    logged = [
        json.loads(JsonFormatter().format(r))
        for r in caplog.records
        if getattr(r, "event", "") == "receiver_unanswered"
    ]
    assert len(logged) == 1 and logged[0]["level"] == "WARNING" and logged[0]["request_id"] == str(waiting.id)
    assert logged[0]["reason"].startswith(f"{where} did not answer since {present.absolute(since)}: its fence")
    assert "demo:silent" not in json.dumps(logged)  # the person's target is never in a log line
    assert DeletionRequest.objects.get(id=waiting.id).lease_generation == 0  # nothing claimed

    said = f"{where} did not answer since {present.absolute(since)}"
    client.force_login(User.objects.create_superuser("root-silent", "root-silent@hq.example", "pw"))
    page = client.get(reverse("admin:deletions_deletionrequest_change", args=[waiting.id])).content.decode()
    assert f"{said}: nothing runs until it answers" in page and "waiting for a free worker" not in page
    shown = json.loads(cmd("show_deletion", str(waiting.id), "--json").out)
    assert shown["request"]["open_question"].startswith(said)

    health = report(clock.now())
    check = health["checks"]["receivers"]
    assert health["status"] == "red" and check["ok"] is False and check["count"] == 1
    assert check["since"] == since.isoformat()  # the worker's note: since when, across processes
    assert check["detail"].startswith(f"{where} did not answer discovery (ConnectError"), check["detail"]
    assert check["detail"].endswith(f"(not answering as registered since {present.absolute(since)})")
    health_cmd = cmd("health")
    assert health_cmd.code == 1 and f"FAIL receivers: {where} did not answer discovery" in health_cmd.out
    overview = client.get("/admin/operations/").content.decode()
    assert "Unhealthy:" in overview and f"receivers ({where} did not answer discovery" in overview

    with pytest.raises(Refused) as refused:  # approving now: the receiver did not answer, nothing else
        deletion_approve(request_id=to_approve.id, actor=named("operator-b"), digest=to_approve.inventory_digest)
    assert refused.value.message.startswith(f"{where} did not answer preview"), refused.value.message
    assert refused.value.message.endswith("so nothing was approved; approve again once it answers")
    assert "no membership" not in refused.value.message and "no longer matches" not in refused.value.message
    assert "\n" not in refused.value.message
    assert DeletionRequest.objects.get(id=to_approve.id).status == "submitted"

    receiver.start()  # the same receiver again, on the same port
    http._reached.clear()
    health = report(clock.now())
    assert health["checks"]["receivers"] == {
        "ok": True,
        "count": 0,
        "registered": 1,
        "detail": "1 registered, each answers with a registered key",
    }
    assert TargetSystem.objects.get(prefix="demo:").unanswered_since is None
    page = client.get(reverse("admin:deletions_deletionrequest_change", args=[waiting.id])).content.decode()
    assert "did not answer" not in page
    assert cmd("run_deletion", str(waiting.id)).code == 0
    assert DeletionRequest.objects.get(id=waiting.id).status == "completed"
    deletion_approve(request_id=to_approve.id, actor=named("operator-b"), digest=to_approve.inventory_digest)


def test_a_receiver_answering_under_a_key_not_registered_turns_health_red(receiver: Receiver) -> None:
    receiver.register(**{"receiver-0": Receiver(port=receiver.port).public()})  # not the key it signs with now
    http._reached.clear()
    check = report(clock.now())["checks"]["receivers"]
    assert check["ok"] is False
    assert check["detail"].startswith(
        f"demo target system at {receiver.url} signs with key 'receiver-1', which is not registered for it "
        "(registered: receiver-0)"
    ), check["detail"]
    assert TargetSystem.objects.get(prefix="demo:").unanswered_since is not None


def test_what_needs_no_receiver_is_settled_while_it_does_not_answer(cmd, receiver: Receiver) -> None:
    """A run reads its target's fence first; when the receiver does not answer, a completed request still
    says so (exit 0, nothing changed) and an expired approval still sends its case back to review."""
    import time_machine
    from django.utils import timezone

    for person in ("demo:silent-done", "demo:silent-expired"):
        demo.enroll(person)
    done = submit_and_approve("demo:silent-done")
    assert cmd("run_deletion", str(done.id)).code == 0
    expired = submit_and_approve("demo:silent-expired")
    receiver.stop()
    ran = cmd("run_deletion", str(done.id))
    assert ran.code == 0 and "already completed" in ran.out and "nothing changed" in ran.out, ran
    with time_machine.travel(timezone.now() + timedelta(days=7, seconds=1), tick=False):
        ran = cmd("run_deletion", str(expired.id))
    assert ran.code == 1 and "expired at" in ran.err and "back in review" in ran.err, ran.err
    after = DeletionRequest.objects.get(id=expired.id)
    assert after.status == "submitted" and after.lease_generation == 0 and not after.stages.exists()
