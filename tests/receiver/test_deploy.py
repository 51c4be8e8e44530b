"""`deploy/` and the production how-to for the receiver, followed as written: the keys made as the
how-to makes them (files only their owner reads), the dataset checked and installed as the tables'
owner, the receiver's own role granted as the how-to grants it, then the receiver started the way
`deploy/receiver.service` starts it (its command, its environment file, its credentials, nothing else
of this shell's environment), with its own TLS; the back-office registers it over https, trusting its
certificate through `RECEIVER_CA_FILE`, and runs a whole deletion of a forum person through it."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from core import grants
from core.authority import named
from deletions.models import DeletionRequest
from deletions.services import deletion_approve, deletion_submit
from ops import netcut
from tests.conftest import ROOT, run_command
from tests.receiver.test_dataset import DATASET, busiest, forum, rows  # noqa: F401  (forum: a fixture)
from tests.receiver.test_receiver_edges import exchange, one_json_line

pytestmark = [pytest.mark.django_db(transaction=True)]
UNIT = ROOT / "deploy" / "receiver.service"
ENV_EXAMPLE = ROOT / "deploy" / "receiver.env.example"
HOWTO = ROOT / "docs" / "how-to" / "production.md"
OWNER_URL = "postgresql://forum_owner@db.internal:5432/forum"  # the how-to's, replaced by the test's
ROLE_PASSWORD = "change-me"  # the how-to's


class Host:
    """The how-to's paths on this machine: /etc/receiver in a temporary folder, /srv/receiver this
    checkout (its .venv), the receiver's host name localhost."""

    def __init__(self, root: Path) -> None:
        self.etc, self.credentials = root / "etc", root / "credentials"
        (self.etc / "tls").mkdir(parents=True)
        self.credentials.mkdir(mode=0o700)

    def here(self, text: str) -> str:
        text = text.replace("/etc/receiver", str(self.etc)).replace("/srv/receiver", str(ROOT))
        return text.replace("receiver.example.internal", "localhost")


def block(name: str, language: str) -> str:
    """The fenced `language` blocks between the how-to's `<!-- name:start/end -->` markers."""
    body = HOWTO.read_text().split(f"<!-- {name}:start -->")[1].split(f"<!-- {name}:end -->")[0]
    found = re.findall(rf"```{language}\n(.*?)```", body, flags=re.S)
    assert found, name
    return "\n".join(found)


def bash(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """A root shell on the receiver's host: PATH and what it is given, nothing of the test's environment."""
    shell = {"PATH": os.environ["PATH"], **env}
    ran = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script], cwd=ROOT, env=shell, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    return ran


def assignments(text: str) -> dict[str, str]:
    """NAME=VALUE lines, as systemd's EnvironmentFile= and a shell's `set -a; . FILE` both read them here."""
    return dict(line.split("=", 1) for line in text.splitlines() if line.strip() and not line.startswith("#"))


def service() -> dict[str, list[str]]:
    """The unit's [Service] settings: each name with its values, in order."""
    section = UNIT.read_text().split("[Service]")[1].split("\n[")[0]
    found: dict[str, list[str]] = {}
    for line in section.splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.partition("=")
            found.setdefault(name, []).append(value)
    return found


def as_the_unit_starts_it(host: Host, env_file: Path) -> tuple[list[str], dict[str, str]]:
    """The command and environment systemd gives the service: the environment file, the unit's own
    Environment= (credentials at %d), its credentials copied readable by the service alone."""
    unit = service()
    assert unit["User"] == ["receiver"] and unit["EnvironmentFile"] == ["/etc/receiver/receiver.env"]
    assert unit["WorkingDirectory"] == ["/srv/receiver"]
    for credential in unit["LoadCredential"]:
        name, _, source = credential.partition(":")
        copied = host.credentials / name
        shutil.copyfile(host.here(source), copied)
        copied.chmod(0o400)  # (as systemd hands a credential over)
    env = {"PATH": "/usr/bin:/bin", **assignments(env_file.read_text())}
    for setting in unit["Environment"]:
        name, _, value = setting.partition("=")
        env[name] = value.replace("%d", str(host.credentials))
    (command,) = unit["ExecStart"]
    argv = [host.here(re.sub(r"\$\{(\w+)\}", lambda m: env[m[1]], word)) for word in shlex.split(command)]
    return argv, env


@pytest.fixture
def receiver_role(forum: str) -> Iterator[str]:  # noqa: F811
    """The URL of the receiver's own role in the forum database (granted by the test, as the how-to says)."""
    yield re.sub(r"^postgresql://[^@/]*@", f"postgresql://receiver:{ROLE_PASSWORD}@", forum)
    with psycopg.connect(forum, autocommit=True) as conn:
        conn.execute("DROP OWNED BY receiver")
        conn.execute("DROP ROLE receiver")


def test_the_receiver_deployed_as_the_how_to_and_the_unit_say_runs_a_deletion_over_its_own_tls(
    forum: str,  # noqa: F811
    receiver_role: str,
    tmp_path: Path,
    settings: Any,
) -> None:
    host = Host(tmp_path)
    shutil.copyfile(DATASET, host.etc / "dataset.yaml")
    # The keys, as the how-to makes them: files only their owner may read.
    bash(host.here(block("receiver-keys", "bash")))
    for secret in (host.etc / "signing-key", host.etc / "tls" / "key.pem"):
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600, secret
    # The environment file, from the example, filled in as its comments ask.
    port = netcut.free_port()
    url = f"https://localhost:{port}/receiver/v1/"
    filled = {
        "RECEIVER_PUBLIC_URL": url,
        "RECEIVER_DATABASE_URL": receiver_role,
        "RECEIVER_BACKOFFICE_KEY": grants.public_key(),
        "RECEIVER_BIND": f"127.0.0.1:{port}",
    }
    example = assignments(ENV_EXAMPLE.read_text())
    assert set(filled) <= set(example) and example["DEPLOYMENT_ENV"] == "production"
    env_file = host.etc / "receiver.env"
    env_file.write_text("".join(f"{k}={host.here(filled.get(k, v))}\n" for k, v in example.items()))
    # The dataset checked and installed as the tables' owner; then the service's own role granted.
    installed = bash(host.here(block("receiver-install", "bash")).replace(OWNER_URL, forum))
    assert "installed" in installed.stdout, installed.stdout
    with psycopg.connect(forum, autocommit=True) as conn:
        conn.execute(block("receiver-role", "sql"))  # type: ignore[call-overload]

    argv, env = as_the_unit_starts_it(host, env_file)
    assert "RECEIVER_SIGNING_KEY" not in env  # the key is a file, not in the environment
    log = tmp_path / "journal"  # (its stderr, as journald keeps it)
    with log.open("w") as journal:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=journal, text=True)
    try:
        assert proc.stdout is not None
        said = proc.stdout.readline().strip()
        assert said == f"Receiver: https://127.0.0.1:{port}/receiver/v1/ (public URL {url})", said + log.read_text()
        # Plain HTTP to its TLS port: one JSON line saying so, nothing served.
        status, headers, body, _ = exchange(port, b"GET /receiver/v1/ HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 400 and "this receiver speaks HTTPS" in one_json_line(headers, body)
        with pytest.raises(httpx.ConnectError):  # a client that does not trust its certificate gets nothing
            httpx.get(url)

        # The back-office trusts its certificate (RECEIVER_CA_FILE) and registers it under the key it prints.
        settings.RECEIVER_IN_PROCESS = ""
        settings.RECEIVER_CA_FILE = str(host.etc / "tls" / "cert.pem")
        key = bash(
            f"set -a; . {env_file}; set +a\n"
            + f"RECEIVER_SIGNING_KEY_FILE={host.etc}/signing-key .venv/bin/python -m receiver key"
        ).stdout.strip()
        registered = run_command(
            "register_target", "--name", "forum", "--prefix", "forum:", "--url", url, "--key", key, token=False
        )
        assert registered.code == 0, registered.err

        uid, handle = busiest(forum)
        assert rows(forum, "SELECT count(*) FROM comments WHERE author_id = %(u)s", u=uid)[0][0] > 0
        req = deletion_submit(target=f"forum:{handle}", actor=named("operator-a"), reason="deployed receiver")
        deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
        ran = run_command("run_deletion", str(req.id))
        assert ran.code == 0, ran.err
        assert DeletionRequest.objects.get(id=req.id).status == "completed"
        assert rows(forum, "SELECT count(*) FROM comments WHERE author_id = %(u)s", u=uid) == [(0,)]
        assert rows(forum, "SELECT count(*) FROM memberships WHERE user_id = %(u)s", u=uid) == [(0,)]
    finally:
        proc.terminate()  # systemd's stop: SIGTERM, running calls finish, then it exits
        code = proc.wait(timeout=60)
        if proc.stdout is not None:
            proc.stdout.close()
    logged = log.read_text()
    assert code == 0, logged
    assert "Traceback" not in logged, logged
    with pytest.raises(ConnectionRefusedError):  # stopped, its worker too: nothing listens there
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
