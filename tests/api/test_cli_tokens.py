"""The command line acts only as an authenticated person: a decision needs the token of the person
its actor flag names (BACKOFFICE_TOKEN or --token-file), of scope decide; refused, nothing written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from core import clock, tokens
from core.models import ApiToken
from deletions.models import DeletionRequest, Status
from tests.conftest import manage_argv, run_command, subprocess_env, token_file
from tests.support import table_rows

TABLES = ("entity_deletion_requests", "entity_deletion_approvals", "entity_deletion_decisions")


@pytest.fixture
def submitted(db) -> dict[str, str]:
    import json

    ran = run_command("submit_deletion", "--target", "demo:cli-token", "--requested-by", "operator-a")
    assert ran.code == 0, ran.err
    return json.loads(ran.out)


def approve(req: dict[str, str], by: str, *extra: str):
    args = ("approve_deletion", req["id"], "--approved-by", by, "--inventory-digest", req["inventory_digest"], *extra)
    return run_command(*args, token=False)


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("none", "--approved-by operator-b is refused: no token: give your personal token"),
        ("other", "the token is operator-c's, and a command acts only as the person whose token it holds"),
        ("read", "may only read (scope read)"),
        ("garbage", "the token is not a back-office token"),
        ("revoked", "was revoked"),
    ],
)
def test_approving_without_ones_own_decide_token_is_refused(submitted, how: str, message: str) -> None:
    extra: tuple[str, ...] = ()
    if how == "other":
        extra = ("--token-file", token_file("operator-c") or "")
    if how == "read":
        extra = ("--token-file", token_file("operator-b", scope="read") or "")
    if how == "garbage":
        path = token_file("operator-b") or ""
        Path(path).write_text("not-a-token")
        extra = ("--token-file", path)
    if how == "revoked":
        path = token_file("operator-b") or ""
        ApiToken.objects.filter(digest=tokens.digest(Path(path).read_text())).update(revoked_at=clock.now())
        extra = ("--token-file", path)
    before = table_rows(*TABLES)
    ran = approve(submitted, "operator-b", *extra)
    assert ran.code == 1, (ran.code, ran.err)
    assert message in ran.err and len(ran.err.strip().splitlines()) == 1, ran.err
    assert table_rows(*TABLES) == before
    assert DeletionRequest.objects.get(id=submitted["id"]).status == Status.SUBMITTED


def test_the_token_of_the_named_person_approves(submitted) -> None:
    ran = approve(submitted, "operator-b", "--token-file", token_file("operator-b") or "")
    assert ran.code == 0, ran.err
    assert DeletionRequest.objects.get(id=submitted["id"]).approvals.get().approved_by == "operator-b"


def test_a_token_file_that_cannot_be_read_is_bad_usage(submitted) -> None:
    ran = approve(submitted, "operator-b", "--token-file", "/nonexistent/token")
    assert ran.code == 2 and "--token-file '/nonexistent/token' cannot be read" in ran.err


def test_every_decision_command_asks_for_the_token(db) -> None:
    """Each command with an actor flag, run with a token of someone else: refused before any work."""
    other = token_file("operator-c") or ""
    commands = [
        ("submit_deletion", "--target", "demo:x", "--requested-by", "operator-a"),
        ("cancel_deletion", "00000000-0000-0000-0000-000000000001", "--by", "operator-a", "--reason", "r"),
        ("resume_deletion", "00000000-0000-0000-0000-000000000001", "--by", "operator-a"),
        ("revoke_approval", "00000000-0000-0000-0000-000000000001", "--by", "operator-a", "--reason", "r"),
        (
            "extend_deadline",
            "00000000-0000-0000-0000-000000000001",
            "--by",
            "operator-a",
            "--reason",
            "r",
            "--months",
            "1",
        ),
        (
            "record_effect",
            "00000000-0000-0000-0000-000000000001",
            "--by",
            "operator-a",
            "--not-applied",
            "--evidence",
            "e",
        ),
        ("request_retirement", "--workspace", "w", "--requested-by", "operator-a", "--reason", "r", "--confirm", "w"),
        ("hold_retirement", "00000000-0000-0000-0000-000000000001", "--by", "operator-a", "--reason", "r"),
        ("release_retirement", "00000000-0000-0000-0000-000000000001", "--by", "operator-a", "--reason", "r"),
        ("cancel_retirement", "00000000-0000-0000-0000-000000000001", "--by", "operator-a", "--reason", "r"),
        ("resume_retirement", "00000000-0000-0000-0000-000000000001", "--by", "operator-a", "--reason", "r"),
        ("retry_notices", "00000000-0000-0000-0000-000000000001", "--by", "operator-a", "--reason", "r"),
        ("retry_purge", "00000000-0000-0000-0000-000000000001", "--by", "operator-a", "--reason", "r"),
        ("close_retirement", "00000000-0000-0000-0000-000000000001", "--by", "operator-a", "--reason", "r"),
        ("close_retirement_alarm", "00000000-0000-0000-0000-000000000001", "--by", "operator-a", "--reason", "r"),
        ("protect_workspace", "w", "--by", "operator-a", "--reason", "r", "--legal-hold"),
        (
            "hand_case",
            "00000000-0000-0000-0000-000000000001",
            "--kind",
            "deletion",
            "--take",
            "--by",
            "operator-a",
            "--reason",
            "r",
        ),
        (
            "records_hold",
            "00000000-0000-0000-0000-000000000001",
            "--kind",
            "deletion",
            "--by",
            "operator-a",
            "--reason",
            "r",
        ),
        ("show_deletion", "00000000-0000-0000-0000-000000000001", "--by", "operator-a"),
        ("deletion_record", "00000000-0000-0000-0000-000000000001", "--by", "operator-a"),
        ("retirement_record", "00000000-0000-0000-0000-000000000001", "--by", "operator-a"),
    ]
    for name, *args in commands:
        ran = run_command(name, *args, "--token-file", other, token=False)
        assert ran.code == 1 and "the token is operator-c's" in ran.err, (name, ran.code, ran.err)


@pytest.mark.django_db(transaction=True)
def test_backoffice_token_in_the_environment_proves_the_person(submitted) -> None:
    raw = Path(token_file("operator-b") or "").read_text()
    argv = manage_argv("approve_deletion", submitted["id"], "--approved-by", "operator-b")
    argv += ["--inventory-digest", submitted["inventory_digest"]]
    wrong = subprocess.run(argv, env=subprocess_env(BACKOFFICE_TOKEN=raw[:-1]), capture_output=True, text=True)
    assert wrong.returncode == 1 and "the token is unknown" in wrong.stderr
    right = subprocess.run(argv, env=subprocess_env(BACKOFFICE_TOKEN=raw), capture_output=True, text=True)
    assert right.returncode == 0, right.stderr
    assert DeletionRequest.objects.get(id=submitted["id"]).status == Status.APPROVED


def test_create_token_prints_it_once_and_keeps_a_digest(db) -> None:
    ran = run_command("create_token", "operator-a", "--name", "laptop", "--scope", "decide")
    assert ran.code == 0, ran.err
    raw = ran.out.strip()
    token = ApiToken.objects.get(name="laptop")
    assert raw.startswith("bo_") and token.digest == tokens.digest(raw) and raw not in str(token.__dict__)
    assert token.scope == "decide" and token.user.username == "operator-a"
    assert tokens.use(raw).actor.name == "operator-a"
    assert run_command("create_token", "nobody", "--name", "x").code == 2
    assert run_command("create_token", "operator-a", "--name", "x", "--days", "9999").code == 2
    assert run_command("create_token", "operator-a", "--name", "bad\x1bname").code == 2


def test_demo_setup_gives_each_demo_person_a_token_they_alone_can_read(db, tmp_path, monkeypatch) -> None:
    folder = tmp_path / "tokens"
    monkeypatch.setenv("DEMO_TOKEN_DIR", str(folder))
    first = run_command("demo_setup", "--no-data")
    assert first.code == 0, first.err
    assert "new for demo, operator-1" in first.out and "intake-portal" in first.out
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    approver = folder / "approver-1"
    assert oct(approver.stat().st_mode & 0o777) == "0o600"
    assert tokens.use(approver.read_text()).actor.name == "approver-1"
    assert tokens.use((folder / "support-1").read_text()).scope == "read"
    assert tokens.use((folder / "intake-portal").read_text()).actor.user.groups.get().name == "intake"
    kept = approver.read_text()
    again = run_command("demo_setup", "--no-data", "--keep-password")
    assert "new for" not in again.out and approver.read_text() == kept  # tokens that still work are kept
