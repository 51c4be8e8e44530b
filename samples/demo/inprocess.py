"""Test machinery, refused in production: the receiver mounted in a back-office process on the demo
application's database, as the suite, `demo_setup`'s back-dated history, chaos's lagging worker and the
bench run it (`RECEIVER_IN_PROCESS=samples.demo.inprocess.application`).

`database` is that connection (alias `target`, the receiver's own): the database `DEMO_DATABASE_URL`
names, else `<name>_target` on the back-office's own server (what `make run` serves). `mount` adds it
to a process running the back-office's settings, with the receiver's settings it reads there (the demo
dataset file; the test switches `RECEIVER_TEST_*` and the effect's timeouts from the environment).
`application` is the receiver's WSGI application, which first enrolls the person an inventory asks
about in the demo application (a `demo:` person exists the first time anything asks: the suite names
hundreds of them); a receiver in its own process serves only the people its application holds
(`python -m samples.demo.seed`).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from samples.demo import seed
from wire import bounds

ALIAS = "target"  # receiver.ALIAS
URL = "DEMO_DATABASE_URL"
DATASET = Path(__file__).with_name("dataset.yaml")
FROM_ENVIRONMENT = (
    "RECEIVER_TEST_UNREADABLE_UNTIL",
    "RECEIVER_TEST_LOOKUP_LAG_SECONDS",
    "RECEIVER_LOCK_TIMEOUT_MS",
    "RECEIVER_STATEMENT_TIMEOUT_MS",
)


def _refuse_in_production() -> None:
    if os.environ.get("DEPLOYMENT_ENV") == "production":
        raise ImproperlyConfigured("the demo application mounted in process is test machinery: refused in production")


def database(default: dict[str, Any]) -> dict[str, Any]:
    """The demo application's connection settings beside the back-office's `default` ones: the database
    DEMO_DATABASE_URL names, else `<its name>_target` on the same server (created on first connection),
    as the table owner; statements bounded as a receiver bounds them, its schema `receiver` first."""
    _refuse_in_production()
    target = {k: v for k, v in default.items() if k not in ("OPTIONS", "MIGRATION", "TEST")}
    target["CONN_HEALTH_CHECKS"] = False  # as the receiver's own: no `SELECT 1` a call (a broken connection fails it)
    target.update(default.get("MIGRATION", {}))  # another system's database: not the application role's
    if os.environ.get(URL):
        target.update(dj_database_url.parse(os.environ[URL], conn_max_age=int(target.get("CONN_MAX_AGE") or 0)))
        target["ENGINE"] = "config.embedded_pg"
        target.pop("EMBEDDED_DATADIR", None)
        if "host" in target.get("OPTIONS", {}):
            target["HOST"] = target["OPTIONS"].pop("host")
    else:
        target["NAME"] = f"{default['NAME']}_target"
        target["CREATE_IF_MISSING"] = True
    timeout = int(os.environ.get("RECEIVER_STATEMENT_TIMEOUT_MS") or bounds.STATEMENT_TIMEOUT_MS)
    lock = int(os.environ.get("RECEIVER_LOCK_TIMEOUT_MS") or bounds.LOCK_TIMEOUT_MS)
    target["OPTIONS"] = {
        "options": f"-c statement_timeout={timeout} -c lock_timeout={lock} -c search_path=receiver,public",
        "server_side_binding": True,
        "prepare_threshold": 5,
    }
    return target


def mount() -> None:
    """The demo application's connection and the receiver's settings, added to this process once."""
    from django.conf import settings
    from django.db import connections

    _refuse_in_production()
    if not getattr(settings, "RECEIVER_DATASET", ""):
        settings.RECEIVER_DATASET = str(DATASET)
    for name in FROM_ENVIRONMENT:
        if not hasattr(settings, name) and os.environ.get(name):
            value = os.environ[name]
            setattr(settings, name, int(value) if name.endswith(("_SECONDS", "_MS")) else value)
    if ALIAS not in settings.DATABASES:
        settings.DATABASES[ALIAS] = database(settings.DATABASES["default"])
    if ALIAS not in connections.settings:
        configured = connections.configure_settings({"default": {}, ALIAS: dict(settings.DATABASES[ALIAS])})
        connections.settings[ALIAS] = configured[ALIAS]


def install() -> None:
    """The demo application's tables (when missing) and the receiver for its dataset, installed in the
    mounted database, as `make run` does with `python -m samples.demo.seed` and `python -m receiver install`."""
    from django.db import connections, transaction

    from receiver.dataset import install as receiver_install

    mount()
    with transaction.atomic(using=ALIAS), connections[ALIAS].cursor() as cur:
        seed.create_schema(cur)
    receiver_install.run(str(DATASET), write=True, rehearse=0)


def enroll(target: str, communities: int) -> None:
    """The demo person an inventory asks about, enrolled in the demo application (its own transaction, or
    a savepoint in the caller's), unless a deletion of theirs already passed the gate (their data is
    what it left); a target the application cannot hold is left for the receiver to answer."""
    from django.db import connections, transaction

    if not target.startswith(seed.PREFIX):
        return
    try:
        with transaction.atomic(using=ALIAS), connections[ALIAS].cursor() as cur:
            cur.execute(
                "SELECT 1 FROM receiver.receiver_people WHERE person_key = %s AND gated_at IS NOT NULL", [target]
            )
            if cur.fetchone() is None:
                seed.enroll(cur, target, communities)
    except seed.Refused:
        return


StartResponse = Callable[..., Any]


def application(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """The receiver's application, after an inventory's person is enrolled (before the call is checked:
    test machinery writes what the test needs; the receiver then checks the call as always)."""
    from receiver import http

    mount()
    if environ.get("REQUEST_METHOD") == "POST" and environ.get("PATH_INFO", "").endswith("/inventory"):
        raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ = {**environ, "wsgi.input": io.BytesIO(raw)}
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("target"), str):
            count = body.get("communities")
            enroll(body["target"], count if isinstance(count, int) and 2 <= count <= 10_000 else 2)
    return http.application(environ, start_response)
