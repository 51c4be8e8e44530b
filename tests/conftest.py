"""Shared fixtures: commands with exit codes, approved requests, subprocess env."""

from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from core.authority import named
from core.store import connection_url
from tests import alongside

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Ran:
    code: int
    out: str
    err: str


ACTOR_FLAGS = ("--by", "--approved-by", "--requested-by")
TOKEN_DIR = Path(tempfile.mkdtemp(prefix="backoffice-test-tokens-"))


def token_file(username: str, *, scope: str = "decide") -> str | None:
    """A file holding a fresh personal token of `username` (None when no such user exists)."""
    from django.contrib.auth.models import User

    from core import tokens

    if not username.isprintable() or len(username) > 150:
        return None  # the command refuses the name itself
    user = User.objects.filter(username__iexact=username).first()
    if user is None:
        return None
    path = TOKEN_DIR / f"{uuid.uuid4().hex}.token"
    path.write_text(tokens.issue(user, name="test", scope=scope))
    return str(path)


def with_token(args: tuple[str, ...]) -> tuple[str, ...]:
    """The command line a person types holding their own token: the person the actor flag names
    proves it with `--token-file` (the command checks it as it would any token)."""
    if "--token-file" in args:
        return args
    for i, arg in enumerate(args[:-1]):
        if arg in ACTOR_FLAGS:
            path = token_file(args[i + 1])
            return (*args, "--token-file", path) if path else args
    return args


def run_command(name: str, *args: str, token: bool = True) -> Ran:
    """Run a management command in-process and return its exit code and output; an actor flag's
    person holds their own token unless `token=False`."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(name, *(with_token(args) if token else args), stdout=out, stderr=err)
        code = 0
    except CommandError as exc:
        code = exc.returncode
        err.write(str(exc))
    return Ran(code, out.getvalue(), err.getvalue())


@pytest.fixture
def cmd():
    return run_command


def database_url() -> str:
    return connection_url()


def subprocess_env(**extra: str) -> dict[str, str]:
    """Environment for a child `manage.py` that talks to this test database."""
    connection.ensure_connection()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDDED_PG")}
    mounted = extra.get("RECEIVER_IN_PROCESS", settings.RECEIVER_IN_PROCESS)
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=database_url(),
        DEMO_DATABASE_URL=connection_url("target"),
        RECEIVER_IN_PROCESS=settings.RECEIVER_IN_PROCESS,
        # The mounted receiver's URL; a receiver the child starts itself derives its own from its address.
        RECEIVER_PUBLIC_URL=settings.RECEIVER_PUBLIC_URL if mounted else "",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def manage_argv(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "manage.py"), *args]


def pytest_configure(config: pytest.Config) -> None:
    """The demo's personal tokens go to a folder of this session (`demo_setup` reads
    DEMO_TOKEN_DIR): the repository's `.demo-tokens/` is the walkthroughs' alone, as a reader's, so
    a session beside them (`tests.alongside`) never replaces a token they are about to use."""
    os.environ["DEMO_TOKEN_DIR"] = tempfile.mkdtemp(prefix="backoffice-demo-tokens-")
    alongside.register(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    alongside.stop(config)
    shutil.rmtree(os.environ.pop("DEMO_TOKEN_DIR", ""), ignore_errors=True)


def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    return alongside.report(pyfuncitem)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> None:
    """The test databases, then the demo application's tables and its receiver installed in its own."""
    from samples.demo import inprocess

    with django_db_blocker.unblock():
        inprocess.install()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that uses the database uses both: the case database and the demo application's.
    Then the tests marked `alongside` start in a pytest process of their own (`tests.alongside`)."""
    for item in items:
        marker = item.get_closest_marker("django_db")
        names = getattr(item, "fixturenames", ())
        if marker is None and not {"db", "transactional_db"} & set(names):
            continue
        kwargs: dict[str, Any] = (
            dict(marker.kwargs) if marker is not None else {"transaction": "transactional_db" in names}
        )
        kwargs.setdefault("databases", "__all__")
        item.add_marker(pytest.mark.django_db(*(marker.args if marker else ()), **kwargs), append=False)
    alongside.start(config, items)


# The staff the deletion tests name on command lines and in services.
PEOPLE = {
    "operator-a": ("operators", "approvers"),
    "operator-b": ("operators", "approvers"),
    "operator-c": ("operators", "approvers"),
}


def ensure_people() -> None:
    """Groups (a flushed transactional test loses the migration's) and the staff above."""
    from django.contrib.auth.models import Group, Permission, User

    from ops.groups import ensure_groups

    ensure_groups(Group, Permission)
    for username, groups in PEOPLE.items():
        user, created = User.objects.get_or_create(
            username=username, defaults={"is_staff": True, "email": f"{username}@hq.example"}
        )
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
            user.groups.set(Group.objects.filter(name__in=groups))


DEMO_RECEIVER_URL = settings.RECEIVER_PUBLIC_URL  # the in-process receiver checks its calls were signed for it


def ensure_demo_receiver() -> None:
    """The demo application's receiver registered (`demo:`), with the key the reference receiver signs
    with here; the settings mount it in process (RECEIVER_IN_PROCESS), so no socket is opened."""
    from deletions import targets
    from receiver import signing

    targets.register(
        name="demo target system",
        prefix="demo:",
        base_url=DEMO_RECEIVER_URL,
        keys={signing.key_id(): signing.public_key()},
    )


def _database(request: pytest.FixtureRequest) -> bool:
    """Whether the test uses the database; if so, it is set up now (as its marker asks)."""
    marker = request.node.get_closest_marker("django_db")
    names = request.fixturenames
    if marker is None and "db" not in names and "transactional_db" not in names:
        return False
    transactional = "transactional_db" in names or bool(marker and marker.kwargs.get("transaction"))
    request.getfixturevalue("transactional_db" if transactional else "db")
    return True


@pytest.fixture(autouse=True)
def people(request: pytest.FixtureRequest) -> None:
    """Every test that uses the database can name operator-a, -b and -c."""
    if _database(request):
        ensure_people()


@pytest.fixture(autouse=True)
def demo_receiver(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test that uses the database reaches the demo application through its receiver; what a
    transactional test committed there is gone after it (no model of the back-office's lives there, so
    Django's flush does not reach it)."""
    if not _database(request):
        yield
        return
    ensure_demo_receiver()
    yield
    marker = request.node.get_closest_marker("django_db")
    if "transactional_db" in request.fixturenames or bool(marker and marker.kwargs.get("transaction")):
        from tests import target

        target.reset()


def submit_and_approve(target: str = "demo:alice") -> Any:
    from deletions.services import deletion_approve, deletion_submit

    req = deletion_submit(target=target, actor=named("operator-a"))
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    return req


@pytest.fixture
def observe(record_property):
    """Record what a rehearsal test saw; `manage.py rehearse` prints it as the Actual result."""

    def note(text: str) -> None:
        record_property("observed", text)

    return note


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """Which named SQL statements this run executed in-process (worker subprocesses not counted):
    a write no test reaches shows up here."""
    from core.sql import LOADED, USED

    names = sorted({f"{s.path.name}:{n}" for s in LOADED for n in s.names()})
    if not names or config.option.file_or_dir:  # the whole suite only (`make test`)
        return
    never = [n for n in names if not USED[n]]
    terminalreporter.write_line(
        f"named SQL statements: {len(names) - len(never)} of {len(names)} run"
        + (f"; never run here: {', '.join(never)}" if never else "")
    )
