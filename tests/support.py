"""Test plumbing shared by every suite: waiting, racing threads, table snapshots."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connection, connections


def wait_for(predicate: Callable[[], Any], timeout: float = 120.0, what: str = "condition") -> Any:
    """Poll a condition another process or thread brings about; return as soon as it holds, fail
    (never hang) after `timeout`: generous, so a loaded machine (load 15 on 2 cores) still passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def race(n: int, fn: Callable[[int], Any], timeout: float = 60) -> list[Any]:
    """Run fn(i) in n threads released together; each on its own connection."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def body(i: int) -> None:
        try:
            barrier.wait(timeout=60)
            results[i] = fn(i)
        except Exception as exc:
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    assert not any(t.is_alive() for t in threads), "a racing thread deadlocked"
    return results


# The demo application's tables and the receiver's records: in its own database (alias `target`).
DEMO_TABLES = ("people", "memberships", "posts", "agents", "receiver.receiver_operations")


def table_rows(*tables: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the named tables: compared before and after a refusal. `DEMO_TABLES` are read
    from the demo application's own database."""
    from django.db import connections

    out = {}
    for table in tables:
        with connections["target" if table in DEMO_TABLES else "default"].cursor() as cur:
            cur.execute(f"SELECT * FROM {table} ORDER BY 1")
            out[table] = cur.fetchall()
    return out


def force(queryset: Any, **values: Any) -> int:
    """Put rows in a state the workflow never moves them to (another system's write, a restored
    backup): the database's lifecycle guards are off for this one update only."""

    with connection.cursor() as cur:
        cur.execute("SET session_replication_role = replica")
        try:
            return int(queryset.update(**values))
        finally:
            cur.execute("SET session_replication_role = origin")


def table_columns(table: str) -> list[str]:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
            [table],
        )
        return [r[0] for r in cur.fetchall()]


def clone_rows(
    table: str, template: str, n: int, overrides: dict[str, str], params: list[Any], skip: tuple[str, ...] = ()
) -> None:
    """INSERT n copies of the template rows of `table` (those `template`, a condition over t,
    selects), column by column, with `overrides` (SQL over t = the template row and g = the copy's
    number): rows as a big system holds them, written without the services. The bench builds its
    data with it too."""
    cols = [c for c in table_columns(table) if c not in skip]
    select = ", ".join(overrides.get(c, f"t.{c}") for c in cols)
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO {table} ({', '.join(cols)}) SELECT {select}"
            f" FROM generate_series(1, {int(n)}) g CROSS JOIN {table} t WHERE {template}",
            params,
        )
