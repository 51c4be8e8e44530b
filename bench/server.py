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
WHERE = (("case", "default"), ("target", "target"))
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
    RESTARTED.append(path)
    return True


RESTARTED: list[Path] = []  # the embedded server the bench restarted: its cleanup at exit went with the first


def stop_restarted() -> None:
    """At the end of the run: the embedded server the bench restarted stopped, and its throw-away data
    directory removed (the suite's settings put it in a temporary directory of this process's own)."""
    import shutil

    from config import embedded

    for path in RESTARTED:
        embedded.stop(path)
        if os.environ.get("EMBEDDED_PG_CLEANUP") == "delete":
            shutil.rmtree(path, ignore_errors=True)
    RESTARTED.clear()


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


def reading() -> dict[str, Any]:
    """Commits and (when counted) statements so far, in the case database and the target's apart and
    summed, and the server's CPU seconds so far (`server_cpu_seconds`)."""
    names = {where: connections[alias].settings_dict["NAME"] for where, alias in WHERE}
    flush()  # this process's own pending counts (a seeding just before) go in first
    time.sleep(1.1)  # then those of every other process that flushed, or is busy (at most once a second)
    by_name = counted_now(list(names.values()))
    out: dict[str, Any] = {where: by_name[name] for where, name in names.items()}
    out["commits"] = sum(int(out[w]["commits"]) for w in names)
    out["statements"] = -1 if out["case"]["statements"] < 0 else sum(int(out[w]["statements"]) for w in names)
    out["server_cpu_s"] = server_cpu_seconds()
    return out


def server_cpu_seconds() -> float | None:
    """The database server's CPU seconds so far: the postmaster's own, its live processes' (backends,
    WAL writer, checkpointer...) and those of the ones it already reaped (its children's times), so the
    difference of two readings is what the server spent between them, backends that ended included.
    None when the server is not a process of this machine that this user can read."""
    try:
        import psutil

        with connection.cursor() as cur:
            cur.execute("SELECT pg_backend_pid()")
            (backend,) = cur.fetchone()
        postmaster = psutil.Process(psutil.Process(backend).ppid())
        own = postmaster.cpu_times()
        total = own.user + own.system + own.children_user + own.children_system
        for child in postmaster.children():
            try:
                t = child.cpu_times()
                total += t.user + t.system
            except psutil.NoSuchProcess:
                continue
        return total
    except Exception:
        return None


def counted(names: list[str]) -> dict[str, dict[str, float]]:
    """Commits and (when counted) statements so far in each of these databases, apart (the shop
    section tells the case database's from the receiver's), with the statements' execution time in ms
    (a commit's flush is not in it: it runs after the statement)."""
    flush()
    time.sleep(1.1)
    return counted_now(names)


def counted_now(names: list[str]) -> dict[str, dict[str, float]]:
    """`counted` without the wait: what the server holds now."""
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


def per_stage(before: dict[str, Any], after: dict[str, Any], stages: int) -> dict[str, float | None]:
    """The deltas per stage, summed and at each database (`case_`, `target_`); the readings' own
    statements (a few) are spread over the stages. The server's CPU a stage when it was read."""

    def each(key: str, b: dict[str, Any], a: dict[str, Any]) -> float | None:
        if b[key] is None or b[key] < 0:
            return None
        return round((a[key] - b[key]) / stages, 2)

    out: dict[str, float | None] = {
        "commits_per_stage": each("commits", before, after),
        "round_trips_per_stage": each("statements", before, after),
    }
    for where in ("case", "target"):
        out[f"{where}_commits_per_stage"] = each("commits", before[where], after[where])
        out[f"{where}_round_trips_per_stage"] = each("statements", before[where], after[where])
    if before.get("server_cpu_s") is not None and after.get("server_cpu_s") is not None:
        out["server_cpu_ms_per_stage"] = round(1000 * (after["server_cpu_s"] - before["server_cpu_s"]) / stages, 3)
    return out
