"""Hostile input everywhere: every command slot and every admin URL and filter, with the same
table of values. A command refuses in one line (the input cut to 100 characters), with exit
1 or 2, and writes nothing; the admin answers 200, 400 or 404, never 500."""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User

from tests.conftest import submit_and_approve
from tests.support import DEMO_TABLES, table_rows

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = {
    "empty": "",
    "over-long": "x" * 100_000,
    "long": "x" * 10_000,
    "NUL": "a\x00b",
    "ANSI escape": "\x1b[31mred\x1b[0m",
    "control char": "bell\x07",
    "newline": "two\nlines",
    "right-to-left override": "abc\u202edef",
    "SQL-ish": "'; DROP TABLE entity_deletion_requests; --",
    "negative": "-1",
    "huge number": "100000000000000000000",
}
TABLES = (
    "entity_deletion_requests",
    "entity_deletion_approvals",
    "entity_deletion_stage_history",
    "entity_deletion_stage_attempts",
    "entity_deletion_decisions",
    "retirements_workspace",
    "retirements_retirementrequest",
    "retirements_noticeslot",
    "retirements_decision",
    "auth_user",
    *DEMO_TABLES,
    "entity_deletion_operator_records",
)


@dataclass(frozen=True)
class Slot:
    name: str
    argv: tuple[str, ...]  # "{v}" marks the hostile value; "{id}", "{digest}", "{rid}" the fixtures
    accepts: frozenset[str] = frozenset()  # values that are legitimate here (they may write)


SLOTS = [
    Slot("submit --target", ("submit_deletion", "--target", "{v}", "--requested-by", "operator-a")),
    Slot("submit --requested-by", ("submit_deletion", "--target", "demo:h", "--requested-by", "{v}")),
    Slot(
        "submit --reason",
        ("submit_deletion", "--target", "demo:h", "--requested-by", "operator-a", "--reason", "{v}"),
        frozenset({"empty", "newline", "SQL-ish", "negative", "huge number"}),
    ),
    Slot("approve id", ("approve_deletion", "{v}", "--approved-by", "operator-b", "--inventory-digest", "{digest}")),
    Slot(
        "approve --approved-by", ("approve_deletion", "{id}", "--approved-by", "{v}", "--inventory-digest", "{digest}")
    ),
    Slot(
        "approve --inventory-digest",
        ("approve_deletion", "{id}", "--approved-by", "operator-b", "--inventory-digest", "{v}"),
    ),
    Slot("cancel id", ("cancel_deletion", "{v}", "--by", "operator-b", "--reason", "r")),
    Slot(
        "cancel --reason",
        ("cancel_deletion", "{id}", "--by", "operator-b", "--reason", "{v}"),
        frozenset({"newline", "SQL-ish", "negative", "huge number"}),
    ),
    Slot("resume id", ("resume_deletion", "{v}", "--by", "operator-b")),
    Slot("resume --by", ("resume_deletion", "{id}", "--by", "{v}")),
    Slot("cancel --by", ("cancel_deletion", "{id}", "--by", "{v}", "--reason", "r")),
    Slot("show_deletion --by", ("show_deletion", "{id}", "--by", "{v}")),
    Slot(
        "extend_deadline --months",
        ("extend_deadline", "{id}", "--by", "operator-b", "--reason", "r", "--months", "{v}"),
    ),
    Slot("record_effect --by", ("record_effect", "{id}", "--by", "{v}", "--applied", "--evidence", "e")),
    Slot(
        "revoke --reason",
        ("revoke_approval", "{id}", "--by", "operator-b", "--reason", "{v}"),
        frozenset({"newline", "SQL-ish", "negative", "huge number"}),
    ),
    Slot("run id", ("run_deletion", "{v}")),
    Slot("run --executor-id", ("run_deletion", "{id}", "--executor-id", "{v}"), frozenset({"negative", "huge number"})),
    Slot("run --stage-delay-ms", ("run_deletion", "{id}", "--stage-delay-ms", "{v}")),
    Slot("run --fail-stage", ("run_deletion", "{id}", "--fail-stage", "{v}")),
    Slot("show_deletion id", ("show_deletion", "{v}")),
    Slot("create_workspace --slug", ("create_workspace", "--slug", "{v}", "--name", "N"), frozenset({"huge number"})),
    Slot(
        "create_workspace --name",
        ("create_workspace", "--slug", "hostile-ws", "--name", "{v}"),
        frozenset({"SQL-ish", "negative", "huge number"}),
    ),
    Slot(
        "request_retirement --workspace",
        (
            "request_retirement",
            "--workspace",
            "{v}",
            "--requested-by",
            "operator-a",
            "--reason",
            "r",
            "--confirm",
            "{v}",
        ),
    ),
    Slot(
        "request_retirement --reason",
        (
            "request_retirement",
            "--workspace",
            "old-ws",
            "--requested-by",
            "operator-a",
            "--reason",
            "{v}",
            "--confirm",
            "old-ws",
        ),
        frozenset({"newline", "SQL-ish", "negative", "huge number"}),
    ),
    Slot("hold id", ("hold_retirement", "{v}", "--by", "operator-a", "--reason", "r")),
    Slot("hold --by", ("hold_retirement", "{rid}", "--by", "{v}", "--reason", "r")),
    Slot(
        "hold --reason",
        ("hold_retirement", "{rid}", "--by", "operator-a", "--reason", "{v}"),
        frozenset({"newline", "SQL-ish", "negative", "huge number"}),
    ),
    Slot("show_retirement id", ("show_retirement", "{v}")),
    Slot(
        "close alarm --kind",
        ("close_retirement_alarm", "{rid}", "--by", "operator-a", "--reason", "r", "--kind", "{v}"),
    ),
]


@pytest.fixture
def fixtures(cmd) -> dict[str, str]:
    req = submit_and_approve("demo:hostile")
    for argv in (
        ("create_workspace", "--slug", "old-ws", "--name", "Old", "--disabled"),
        ("create_workspace", "--slug", "held-ws", "--name", "Held", "--disabled"),
    ):
        assert cmd(*argv).code == 0
    made = cmd(
        "request_retirement",
        "--workspace",
        "held-ws",
        "--requested-by",
        "operator-a",
        "--reason",
        "r",
        "--confirm",
        "held-ws",
    )
    assert made.code == 0, made.err
    return {"id": str(req.id), "digest": req.inventory_digest, "rid": json.loads(made.out)["id"]}


def test_every_command_refuses_every_hostile_value_in_one_line_and_writes_nothing(cmd, fixtures, observe) -> None:
    problems, refused = [], 0
    for slot in SLOTS:
        for label, value in HOSTILE.items():
            if label in slot.accepts:
                continue
            argv = [a.replace("{v}", value).format(**fixtures) if "{" in a else a for a in slot.argv]
            before = table_rows(*TABLES)
            where = f"{slot.name} <- {label}"
            try:
                ran = cmd(*argv)
            except Exception as exc:
                problems.append(f"{where}: raised {type(exc).__name__}: {str(exc)[:150]}")
                continue
            if ran.code not in (1, 2):
                problems.append(f"{where}: exit {ran.code} {ran.err[:200]!r} {ran.out[:100]!r}")
                continue
            lines = ran.err.strip().splitlines()
            if len(lines) != 1 or "Traceback" in ran.err:
                problems.append(f"{where}: {len(lines)} lines: {ran.err[:300]!r}")
            elif len(lines[0]) > 400:
                problems.append(f"{where}: the refusal echoes {len(lines[0])} characters")
            if table_rows(*TABLES) != before:
                problems.append(f"{where}: rows changed")
            refused += 1
    observe(f"{len(SLOTS)} command slots x {len(HOSTILE)} values: {refused} refusals, {len(problems)} problems")
    assert not problems, "\n".join(problems)


ADMIN_PATHS = [
    "/admin/deletions/deletionrequest/{v}/change/",
    "/admin/deletions/deletionrequest/{v}/history/",
    "/admin/deletions/deletionrequest/{v}/approve/",
    "/admin/deletions/deletionrequest/{v}/cancel/",
    "/admin/retirements/retirementrequest/{v}/change/",
    "/admin/retirements/retirementrequest/{v}/hold/",
    "/admin/retirements/workspace/{v}/change/",
    "/admin/retirements/workspace/{v}/request-retirement/",
    "/admin/django_q/schedule/{v}/change/",
    "/admin/django_q/success/{v}/change/",
    "/admin/auth/user/{v}/change/",
]
ADMIN_FILTERS = [
    "/admin/deletions/deletionrequest/?status__exact={v}",
    "/admin/deletions/deletionrequest/?q={v}",
    "/admin/deletions/deletionrequest/?created_at__year={v}",
    "/admin/deletions/deletionrequest/?o={v}",
    "/admin/deletions/deletionrequest/?p={v}",
    "/admin/deletions/deletionrequest/export.csv?q={v}",
    "/admin/retirements/retirementrequest/?status__exact={v}",
    "/admin/retirements/retirementrequest/?eligibility_policy={v}",
    "/admin/retirements/retirementrequest/?q={v}",
    "/admin/retirements/workspace/?lifecycle__exact={v}",
    "/admin/retirements/workspace/?legal_hold__exact={v}",
    "/admin/retirements/workspace/?q={v}",
    "/admin/django_q/success/?q={v}",
    "/admin/django_q/failure/?group={v}",
    "/admin/auth/user/?q={v}",
]


def test_every_admin_url_and_filter_answers_every_hostile_value_without_a_500(client, observe) -> None:
    client.force_login(User.objects.create_superuser("root-1", "root@hq.example", "pw"))
    problems, asked = [], 0
    for template in ADMIN_PATHS + ADMIN_FILTERS:
        for label, value in HOSTILE.items():
            url = template.replace("{v}", urllib.parse.quote(value, safe=""))
            try:
                response = client.get(url, follow=True)
            except Exception as exc:
                problems.append(f"{template} <- {label}: raised {type(exc).__name__}: {str(exc)[:150]}")
                continue
            asked += 1
            if response.status_code not in (200, 400, 404):
                problems.append(f"{template} <- {label}: HTTP {response.status_code}")
    observe(f"{len(ADMIN_PATHS)} admin URLs and {len(ADMIN_FILTERS)} filters x {len(HOSTILE)} values: {asked} requests")
    assert not problems, "\n".join(problems)


MORE_SLOTS = [
    Slot("revoke id", ("revoke_approval", "{v}", "--by", "operator-b", "--reason", "r")),
    Slot(
        "resume --reason",
        ("resume_deletion", "{id}", "--by", "operator-b", "--reason", "{v}"),
        frozenset({"empty", "newline", "SQL-ish", "negative", "huge number"}),  # refused for its state instead
    ),
    Slot("release id", ("release_retirement", "{v}", "--by", "operator-a", "--reason", "r")),
    Slot("cancel_retirement --by", ("cancel_retirement", "{rid}", "--by", "{v}", "--reason", "r")),
    Slot("resume_retirement id", ("resume_retirement", "{v}", "--by", "operator-a", "--reason", "r")),
    Slot(
        "retry_notices --reason",
        ("retry_notices", "{rid}", "--by", "operator-a", "--reason", "{v}"),
        frozenset({"newline", "SQL-ish", "negative", "huge number"}),
    ),
    Slot("record_effect id", ("record_effect", "{v}", "--by", "operator-b", "--applied", "--evidence", "e")),
    Slot("record_effect --by", ("record_effect", "{id}", "--by", "{v}", "--applied", "--evidence", "e")),
    Slot(
        "record_effect --evidence",
        ("record_effect", "{id}", "--by", "operator-b", "--not-applied", "--evidence", "{v}"),
        frozenset({"newline", "SQL-ish", "negative", "huge number"}),  # refused for its state instead
    ),
    Slot(
        "record_effect --has-agents",
        ("record_effect", "{id}", "--by", "operator-b", "--applied", "--evidence", "e", "--has-agents", "{v}"),
    ),
    Slot("chaos --seconds", ("chaos", "--seconds", "{v}")),
    Slot("chaos --workers", ("chaos", "--workers", "{v}")),
    Slot("chaos --requests", ("chaos", "--requests", "{v}")),
]
SLOTS.extend(MORE_SLOTS)
