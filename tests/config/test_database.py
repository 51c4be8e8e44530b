"""Connections carry deliberate statement and lock timeouts."""

from __future__ import annotations

import pytest
from django.db import connection


@pytest.mark.django_db
def test_statement_and_lock_timeouts_are_set_on_every_connection() -> None:
    with connection.cursor() as cur:
        cur.execute("SHOW statement_timeout")
        assert cur.fetchone()[0] == "1min"
        cur.execute("SHOW lock_timeout")
        assert cur.fetchone()[0] == "30s"
    # No SELECT 1 before a task's first statement: a broken connection fails that statement and is closed.
    assert connection.settings_dict["CONN_HEALTH_CHECKS"] is False
