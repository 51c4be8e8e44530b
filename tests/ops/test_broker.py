"""The clusters' queue (`core.broker.Broker`, django-q2's ORM broker with one statement per call):
oldest task first, each handed out once until its lock runs out, a row another pusher holds
skipped, a dropped connection replaced; and what the monitor keeps of a task."""

from __future__ import annotations

from datetime import timedelta
from multiprocessing import Queue, Value
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.models import Failure, OrmQ, Success
from django_q.monitor import monitor
from django_q.signing import SignedPackage
from django_q.worker import worker

from core.broker import Broker
from core.queue import enqueue
from deletions.models import DeletionRequest, Status
from tests.conftest import database_url, submit_and_approve

pytestmark = pytest.mark.django_db(transaction=True)


def queued(broker: Any, name: str) -> int:
    package = SignedPackage.dumps({"id": name, "name": name, "func": "ops.tasks.beat", "args": (), "kwargs": {}})
    return int(broker.enqueue(package))


def test_the_site_uses_this_broker() -> None:
    assert isinstance(get_broker(), Broker)


def test_the_oldest_task_is_handed_out_once_until_acknowledged_or_its_lock_runs_out() -> None:
    broker = get_broker()
    first, second = queued(broker, "first"), queued(broker, "second")
    taken = broker.dequeue()
    assert [pk for pk, _ in taken] == [first]
    assert SignedPackage.loads(taken[0][1])["name"] == "first"
    assert OrmQ.objects.get(id=first).lock > timezone.now() + timedelta(seconds=60)  # locked for django-q2's retry
    assert [pk for pk, _ in broker.dequeue()] == [second]
    assert broker.dequeue() is None  # nothing left whose lock ran out
    broker.acknowledge(first)
    assert list(OrmQ.objects.values_list("id", flat=True)) == [second]
    OrmQ.objects.filter(id=second).update(lock=timezone.now() - timedelta(seconds=1))  # never acknowledged
    assert [pk for pk, _ in broker.dequeue()] == [second]


def test_a_task_another_pusher_is_taking_is_skipped_not_waited_for() -> None:
    broker = get_broker()
    first, second = queued(broker, "first"), queued(broker, "second")
    with psycopg.connect(database_url()) as other:
        other.execute("SET lock_timeout = '5s'")
        other.execute("SELECT id FROM django_q_ormq WHERE id = %s FOR UPDATE", [first])  # its transaction stays open
        assert [pk for pk, _ in broker.dequeue()] == [second]
    assert [pk for pk, _ in broker.dequeue()] == [first]  # the other let go without taking it


def test_a_connection_the_database_dropped_is_replaced_once() -> None:
    broker = get_broker()
    first = queued(broker, "first")
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    with psycopg.connect(database_url(), autocommit=True) as other:
        assert other.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone() == (True,)
    assert [pk for pk, _ in broker.dequeue()] == [first]
    assert connection.connection.info.backend_pid != pid


def run_through_the_cluster(broker: Any) -> None:
    """What a cluster does with each queued task, in this process: the pusher's dequeue, django-q2's
    worker, then its monitor (which saves the result as the task asks and acknowledges it)."""
    tasks: Queue[Any] = Queue()
    results: Queue[Any] = Queue()
    while taken := broker.dequeue():
        for ack_id, payload in taken:
            task = SignedPackage.loads(payload)
            task["ack_id"] = ack_id
            tasks.put(task)
    tasks.put("STOP")
    worker(tasks, results, Value("f", -1))
    results.put("STOP")
    monitor(results, broker)


def test_a_stage_runs_success_is_not_kept_as_a_task_its_failure_and_control_work_are(settings, client) -> None:
    done = submit_and_approve("demo:kept-1")
    enqueue("deletions.tasks.run_deletion", str(done.id))  # besides the one the approval enqueued
    enqueue("deletions.tasks.run_deletion", "not-an-id")  # fails
    enqueue("ops.tasks.beat", control=True)
    run_through_the_cluster(get_broker(settings.Q_CLUSTER["name"]))
    run_through_the_cluster(get_broker("control"))
    assert DeletionRequest.objects.get(id=done.id).status == Status.COMPLETED
    assert not Success.objects.filter(func="deletions.tasks.run_deletion").exists()
    assert list(Failure.objects.values_list("func", "args")) == [("deletions.tasks.run_deletion", ("not-an-id",))]
    assert list(Success.objects.values_list("func", flat=True)) == ["ops.tasks.beat"]
    assert not OrmQ.objects.exists()  # every task acknowledged, saved or not
    # The successful tasks' page says where a succeeded stage run is recorded instead.
    client.force_login(User.objects.create_superuser("root-1", "root@hq.example", "pw"))
    page = client.get("/admin/django_q/success/").content.decode()
    help_line = " ".join(page.split('id="successes-kept">')[1].split("</p>")[0].split())
    assert help_line.startswith("A stage run that succeeds is not kept here: its case's history records each stage")
    assert 'href="/admin/django_q/failure/">Failed tasks</a>' in help_line
    assert "ops.tasks.beat" in page.split('id="result_list"')[1]
