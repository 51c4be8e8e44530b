"""The security review's reproductions, each refused now: lockouts of one client only, reasons
through the one validator, two former 500s, production refusing weak settings, the CSP header,
the session's age, a permission backend the boundary does not mirror, groups by app and codename."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.core.checks import run_checks
from django.test import Client, override_settings
from django.urls import reverse

from deletions.models import DeletionRequest
from ops.groups import ensure_groups
from retirements.models import Lifecycle, RetirementRequest, Workspace
from tests.config.test_settings import GOOD_KEY, PROD, run
from tests.conftest import ROOT, run_command
from tests.support import force, table_rows

PROXY = "127.0.0.1"  # FORWARDED_ALLOW_IPS' default: the proxy in front of gunicorn
LOGIN = "/admin/login/"


def attempt(client_address: str, username: str, password: str) -> int:
    response = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=client_address).post(
        LOGIN, {"username": username, "password": password, "next": "/admin/"}
    )
    return response.status_code


@pytest.fixture
def approver(db) -> User:
    return User.objects.create_user("approver-9", password="right-password-9", is_staff=True)


def test_wrong_passwords_from_five_clients_behind_the_proxy_lock_out_none_of_the_others(approver) -> None:
    for i in range(5):
        assert attempt(f"203.0.113.{i + 1}", "approver-9", "wrong") == 200  # the form again, with the error
    assert attempt("203.0.113.50", "approver-9", "right-password-9") == 302  # a sixth client logs in


def test_one_client_is_locked_out_after_five_wrong_passwords_and_only_that_client(approver) -> None:
    for _ in range(5):
        attempt("198.51.100.7", "approver-9", "wrong")
    assert attempt("198.51.100.7", "approver-9", "right-password-9") == 429
    assert attempt("198.51.100.8", "approver-9", "right-password-9") == 302


def test_one_client_trying_many_names_is_limited_by_its_address(approver) -> None:
    for i in range(5):
        attempt("198.51.100.9", f"someone-{i}", "guess")
    assert attempt("198.51.100.9", "approver-9", "right-password-9") == 429  # the per-address limit
    assert attempt("198.51.100.10", "approver-9", "right-password-9") == 302


def test_a_forwarded_address_from_an_untrusted_sender_is_not_believed(approver) -> None:
    """A client that is not our proxy cannot pick the address it is locked out by."""
    for i in range(5):
        Client(REMOTE_ADDR="192.0.2.1", HTTP_X_FORWARDED_FOR=f"203.0.113.{i}").post(
            LOGIN, {"username": "approver-9", "password": "wrong"}
        )
    assert (
        Client(REMOTE_ADDR="192.0.2.1")
        .post(LOGIN, {"username": "approver-9", "password": "right-password-9"})
        .status_code
        == 429
    )
    assert attempt("203.0.113.1", "approver-9", "right-password-9") == 302


@pytest.mark.parametrize("reason", ["owner \x1b[31magreed\x1b[0m", "x" * 100_000])
def test_release_retirement_takes_its_reason_through_the_validator(db, reason: str) -> None:
    User.objects.create_user("hq-rel", is_staff=True, is_superuser=True)
    ws = Workspace.objects.create(
        slug="rel-ws", name="Rel", lifecycle=Lifecycle.DISABLED, created_at="2026-01-01T00:00Z"
    )
    assert (
        run_command(
            "request_retirement",
            "--workspace",
            ws.slug,
            "--requested-by",
            "hq-rel",
            "--reason",
            "r",
            "--confirm",
            ws.slug,
        ).code
        == 0
    )
    rid = str(RetirementRequest.objects.get().id)
    assert run_command("hold_retirement", rid, "--by", "hq-rel", "--reason", "check").code == 0
    before = table_rows("retirements_retirementrequest", "retirements_decision")
    ran = run_command("release_retirement", rid, "--by", "hq-rel", "--reason", reason)
    assert ran.code == 2 and "the reason" in ran.err and len(ran.err) < 400, ran.err
    assert table_rows("retirements_retirementrequest", "retirements_decision") == before


@pytest.mark.parametrize("reason", ["checked \x1b]0;owned\x07", "x" * 100_000])
def test_confirm_not_applied_takes_its_reason_through_the_validator(db, reason: str) -> None:
    from tests.conftest import submit_and_approve

    req = submit_and_approve("demo:reason-check")
    force(DeletionRequest.objects.filter(id=req.id), status="needs_attention")
    before = table_rows("entity_deletion_requests", "entity_deletion_decisions")
    ran = run_command("resume_deletion", str(req.id), "--by", "operator-a", "--effect-not-applied", "--reason", reason)
    assert ran.code == 2 and "the reason" in ran.err and len(ran.err) < 400, ran.err
    assert table_rows("entity_deletion_requests", "entity_deletion_decisions") == before


def test_show_retirement_prints_control_characters_escaped(db) -> None:
    User.objects.create_user("hq-show", is_staff=True, is_superuser=True)
    ws = Workspace.objects.create(
        slug="show-ws", name="S", lifecycle=Lifecycle.DISABLED, created_at="2026-01-01T00:00Z"
    )
    run_command(
        "request_retirement", "--workspace", ws.slug, "--requested-by", "hq-show", "--reason", "r", "--confirm", ws.slug
    )
    req = RetirementRequest.objects.get()
    force(RetirementRequest.objects.filter(id=req.id), reason="old row \x1b[2J wiped")  # written before validation
    out = run_command("show_retirement", str(req.id)).out
    assert "\x1b" not in out and "old row \\x1b[2J wiped" in out


@pytest.fixture
def superuser_client(db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root-sec", "r@x", "pw"))
    return client


def test_a_bulk_action_with_a_malformed_selection_is_a_400(superuser_client) -> None:
    url = reverse("admin:deletions_deletionrequest_changelist")
    before = table_rows("entity_deletion_requests")
    for selected in ["not-a-uuid", "\x00", "1' OR '1'='1"]:
        response = superuser_client.post(url, {"action": "cancel_selected", "_selected_action": [selected], "index": 0})
        assert response.status_code == 400, (selected, response.status_code)
        assert b"not valid" in response.content
    for name in [
        "admin:retirements_workspace_changelist",
        "admin:auth_user_changelist",
        "admin:core_apitoken_changelist",
    ]:
        response = superuser_client.post(reverse(name), {"action": "delete_selected", "_selected_action": ["x"]})
        assert response.status_code == 400 and b"not an id of this list" in response.content, name  # any admin list
    assert table_rows("entity_deletion_requests") == before


def test_a_huge_id_filter_is_an_empty_list(superuser_client) -> None:
    for path in [
        "/admin/retirements/workspace/?id=99999999999999999999999",
        "/admin/retirements/retirementrequest/?workspace__id__exact=99999999999999999999999",
    ]:
        response = superuser_client.get(path)
        assert response.status_code == 200, (path, response.status_code)
    response = superuser_client.get("/admin/retirements/workspace/?id=99999999999999999999999")
    assert response.status_code == 200 and b"0 workspaces" in response.content


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"METRICS_TOKEN": "x"}, "METRICS_TOKEN is too weak for production"),
        ({"METRICS_TOKEN": "change-me-too"}, "METRICS_TOKEN is too weak for production"),
        ({"ALLOWED_HOSTS": "*"}, "ALLOWED_HOSTS=* (or any wildcard"),
        ({"ALLOWED_HOSTS": "backoffice.example,.example"}, "ALLOWED_HOSTS=* (or any wildcard"),
        ({"ALLOWED_HOSTS": "backoffice.example,admin.backoffice.example"}, None),
    ],
)
def test_production_refuses_weak_metrics_tokens_and_wildcard_hosts(env: dict[str, str], message: str | None) -> None:
    settings = {"DJANGO_SECRET_KEY": GOOD_KEY, "ALLOWED_HOSTS": "backoffice.example", **PROD, **env}
    proc = run("check", **settings)
    if message is None:
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def test_metrics_want_the_bearer_scheme(settings, db) -> None:
    settings.METRICS_TOKEN = "m" * 40
    assert Client().get("/metrics", HTTP_AUTHORIZATION="m" * 40).status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer " + "m" * 40).status_code == 200


def test_every_admin_page_carries_the_content_security_policy(superuser_client) -> None:
    for path in ["/admin/", "/admin/login/", "/admin/deletions/deletionrequest/", "/admin/inbox/", "/api/v1/docs"]:
        policy = superuser_client.get(path)["Content-Security-Policy"]
        assert "default-src 'self'" in policy and "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert "unsafe-eval" not in policy


def test_sessions_last_eight_hours_and_a_login_lands_in_the_admin(settings, db) -> None:
    assert settings.SESSION_COOKIE_AGE == 8 * 3600
    User.objects.create_user("plain-login", password="pw-login-1", is_staff=True)
    response = Client().post(
        LOGIN, {"username": "plain-login", "password": "pw-login-1", "next": "https://evil.example/"}
    )
    assert response.status_code == 302 and response["Location"] == "/admin/"


def test_a_permission_backend_the_boundary_does_not_mirror_is_refused() -> None:
    with override_settings(
        AUTHENTICATION_BACKENDS=["axes.backends.AxesStandaloneBackend", "sso.backends.GroupsFromIdp"]
    ):
        ids = {e.id for e in run_checks()}
        assert "core.E002" in ids
    with override_settings(AUTHENTICATION_BACKENDS=["axes.backends.AxesStandaloneBackend"]):
        assert "core.E001" in {e.id for e in run_checks()}
    assert not {e.id for e in run_checks()} & {"core.E001", "core.E002"}


def test_a_command_refuses_to_start_with_such_a_backend() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    env["DJANGO_SETTINGS_MODULE"] = "tests.config.sso_settings"
    argv = [sys.executable, str(ROOT / "manage.py"), "show_deletion", "x"]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "core.E002" in proc.stderr


def test_ensure_groups_tells_permissions_apart_by_app_and_model(db) -> None:
    """Another model of the app declaring the same codename does not confuse the groups."""
    other = ContentType.objects.get_for_model(Workspace)
    Permission.objects.create(content_type=other, codename="hold_retirementrequest", name="the same codename")
    ensure_groups(Group, Permission)
    held = Group.objects.get(name="operators").permissions.get(codename="hold_retirementrequest")
    assert held.content_type.model == "retirementrequest"
