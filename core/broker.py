"""The ORM broker of the stage and control clusters: django-q2's own, with its two calls per task
made one named statement each (`queue.sql`).

django-q2's ORM broker runs `close_old_connections()` before each of its queries, and with
`CONN_HEALTH_CHECKS` each of those costs a `SELECT 1` first. To hand out one task it read the
queue, then locked the row it had read in a second statement; a monitor acknowledged a task
twice in the same way. Here a pusher takes its tasks in one `UPDATE ... RETURNING`, and an
acknowledgement is one `DELETE`. A connection the database dropped (a restart) is replaced
once, at once; a second failure goes to django-q2, which logs it and restarts its process.
Measured in drains of 2 workers (`bench/README.md`, seventh pass), with the stage runs'
successes no longer saved (`core.queue`): the pusher's CPU per stage 0.53-0.55 -> 0.16 ms,
the monitor's 0.78-0.82 -> 0.09-0.11 ms, beside the workers' 2.4-3.2 ms.

Enqueueing stays django-q2's (`ORM.enqueue`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from django.db import InterfaceError, OperationalError, connections
from django.utils import timezone
from django_q.brokers.orm import ORM
from django_q.conf import Conf

from core.sql import Statements

SQL = Statements(Path(__file__).with_name("queue.sql"))
T = TypeVar("T")


class Broker(ORM):
    def dequeue(self) -> list[tuple[int, Any]] | None:
        params = {"until": self.timeout(None), "key": self.list_key, "now": timezone.now(), "bulk": Conf.BULK}

        def take(cur: Any) -> list[tuple[int, Any]]:
            cur.execute(SQL.sql("dequeue"), params)
            return [(pk, payload) for pk, payload in cur.fetchall()]

        taken = self._on_cursor(take)
        if taken:
            return taken
        time.sleep(Conf.POLL)  # an empty queue: as django-q2's, wait before asking again
        return None

    def delete(self, task_id: Any) -> None:
        """An acknowledgement (and django-q2's `fail`, for a task it could not read)."""
        self._on_cursor(lambda cur: SQL.run(cur, "acknowledge", id=task_id))

    @staticmethod
    def _on_cursor(use: Callable[[Any], T]) -> T:
        connection = connections[Conf.ORM]
        try:
            with connection.cursor() as cur:
                return use(cur)
        except (InterfaceError, OperationalError):
            if connection.in_atomic_block:
                raise
            connection.close()  # dropped by the database (a restart): one more try, on a new connection
            with connection.cursor() as cur:
                return use(cur)
