"""What the server counted: commits (`pg_stat_database.xact_commit`) and round trips (top-level
statements, `pg_stat_statements.calls`, COMMIT included; the foreign keys' own checks, which the
server runs inside a statement, left out) in the case database and the target
system's, as deltas around one side's run; and the server's settings that matter.

The embedded server the bench starts is restarted once with `pg_stat_statements` preloaded; an
external server (DATABASE_URL) counts round trips only if it preloads it already. Every side runs
in processes that exit before the second reading, so their statistics are flushed by then (a
live backend flushes its commit counts at most once a second).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from django.db import connection, connections

ALIASES = ("default", "target")
SETTINGS = ("fsync", "synchronous_commit", "shared_buffers", "default_transaction_isolation", "server_version")


def preload_statement_stats() -> bool:
    """Before the bench's databases exist: the embedded server restarted with pg_stat_statements.
    True when statements are counted."""
    from config import embedded

    with connection.cursor() as cur:
        cur.execute("SHOW shared_preload_libraries")
        (loaded,) = cur.fetchone()
    if "pg_stat_statements" in loaded:
        return True
    datadir = connection.settings_dict.get("EMBEDDED_DATADIR")
    if not datadir:
        return False  # an external server: it preloads it or not
    with connection.cursor() as cur:
        cur.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
    connection.close()
    path = Path(datadir).expanduser().resolve()
    embedded.stop(path)
    embedded._started.pop(path, None)
    return True


def enable() -> bool:
    """The extension in the case database (its view reads every database's counts)."""
    try:
        with connection.cursor() as cur:
            cur.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        return True
    except Exception:
        return False


def settings() -> dict[str, Any]:
    with connection.cursor() as cur:
        cur.execute("SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s)", [list(SETTINGS)])
        found = {name: f"{value}{' x ' + unit if unit else ''}" for name, value, unit in cur.fetchall()}
    load1, load5, _ = os.getloadavg()
    return {"server": found, "cores": os.cpu_count(), "load_before": [round(load1, 2), round(load5, 2)]}


def flush() -> None:
    """This process's pending counts go to the server when its connections next go idle (at once):
    a process that seeded before a reading calls it, so the seeding is not counted as its work."""
    for alias in ALIASES:
        with connections[alias].cursor() as cur:
            cur.execute("SELECT pg_stat_force_next_flush()")


def reading() -> dict[str, int]:
    """Commits and (when counted) statements so far, summed over both databases."""
    names = [connections[a].settings_dict["NAME"] for a in ALIASES]
    flush()  # this process's own pending counts (a seeding just before) go in first
    time.sleep(1.1)  # then those of every other process that flushed, or is busy (at most once a second)
    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute("SELECT coalesce(sum(xact_commit), 0) FROM pg_stat_database WHERE datname = ANY(%s)", [names])
        (commits,) = cur.fetchone()
        try:
            cur.execute(
                "SELECT coalesce(sum(s.calls), 0) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
                " WHERE d.datname = ANY(%s) AND s.query !~ '^SELECT [$][0-9]+ FROM ONLY '",  # foreign keys' checks
                [names],
            )
            (calls,) = cur.fetchone()
        except Exception:
            calls = -1
    return {"commits": int(commits), "statements": int(calls)}


def counted(names: list[str]) -> dict[str, dict[str, float]]:
    """Commits and (when counted) statements so far in each of these databases, apart (the shop
    section tells the case database's from the receiver's), with the statements' execution time in ms
    (a commit's flush is not in it: it runs after the statement)."""
    flush()
    time.sleep(1.1)
    out: dict[str, dict[str, float]] = {name: {"commits": 0, "statements": -1, "exec_ms": 0.0} for name in names}
    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute("SELECT datname, xact_commit FROM pg_stat_database WHERE datname = ANY(%s)", [names])
        for name, commits in cur.fetchall():
            out[name]["commits"] = int(commits)
        try:
            cur.execute(
                "SELECT d.datname, coalesce(sum(s.calls), 0), coalesce(sum(s.total_exec_time), 0)"
                " FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
                " WHERE d.datname = ANY(%s) AND s.query !~ '^SELECT [$][0-9]+ FROM ONLY ' GROUP BY d.datname",
                [names],
            )
            for name, calls, exec_ms in cur.fetchall():
                out[name]["statements"] = int(calls)
                out[name]["exec_ms"] = float(exec_ms)
        except Exception:
            pass
    return out


def per_stage(before: dict[str, int], after: dict[str, int], stages: int) -> dict[str, float | None]:
    """The deltas per stage; the readings' own statements (a few) are spread over the stages."""
    commits = (after["commits"] - before["commits"]) / stages
    statements = None if before["statements"] < 0 else (after["statements"] - before["statements"]) / stages
    return {"commits_per_stage": round(commits, 2), "round_trips_per_stage": statements and round(statements, 2)}
