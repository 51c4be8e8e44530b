"""The records guard themselves (issue 51 items 3 and 4), against the application's own role.

Retention's door is narrowed in the database: the evidence triggers let a row go only inside the
retention functions (SECURITY DEFINER, for one closed case past its period under no records hold),
never because of a setting; the old `backoffice.retention` mark opens nothing. Every record of what
happened is append-only for the application: alarms (resolved once), notice slots once delivered or
suppressed, sent notifications, records holds (released once), webhook deliveries once final,
Django's admin history, tombstones, the retention job's runs, acknowledged withdrawals and the
registered receivers' keys that evidence cites. And a walk of the catalog finds no table of ours
without an UPDATE and a DELETE guard but those named below, each with its reason.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import psycopg
import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import connection

from api.models import WebhookDelivery, WebhookSubscriber
from core import clock
from core.authority import named
from deletions.models import AuthorityWithdrawal, DeletionAlarm, DeletionRequest, LeaseEvent, StageAttempt
from ops import retention
from ops.models import Notification, RecordsHold, RetentionRun, Tombstone
from retirements.models import Alarm, NoticeSlot, RetirementRequest
from tests.architecture.test_application_role import ROLE, as_role, refused, role_url
from tests.conftest import ROOT, manage_argv, run_command, submit_and_approve, subprocess_env
from tests.support import force

# Tables of the case database with no UPDATE or no DELETE guard, and why none is needed. Any other
# table must have both (a BEFORE ROW trigger that refuses), or this walk fails: a new table says
# which it is when it is made.
UNGUARDED = {
    # The work queue and the web's sessions: the machinery's own working rows, not records.
    "django_q_ormq": "the work queue: django-q2 takes and removes its tasks",
    "django_q_task": "the work queue's results, pruned on a schedule (ops: prune results)",
    "django_q_schedule": "the work queue's schedules, rewritten as each runs",
    "django_session": "login sessions: made, renewed and removed by Django",
    # The framework's bookkeeping and its people.
    "django_migrations": "the schema's history: written by migrate (as the owner)",
    "django_content_type": "the framework's names for models, made by migrate",
    "auth_user": "people: staff edit them in the admin (Django's history records it); decisions name them",
    "auth_group": "the staff groups: configuration, edited in the admin (recorded in its history)",
    "auth_group_permissions": "the groups' permissions: configuration (data migrations and the admin)",
    "auth_permission": "the models' permissions: made by migrate",
    "auth_user_groups": "who is in which group: configuration, edited in the admin (recorded in its history)",
    "auth_user_user_permissions": "a person's own permissions: configuration, edited in the admin",
    "axes_accessattempt": "django-axes' failed-login counters: reset on success and when their time runs out",
    "axes_accessattemptexpiration": "django-axes' expiry of those counters",
    "axes_accessfailurelog": "django-axes' failure log: the library prunes it",
    "axes_accesslog": "django-axes' login log: the library prunes it",
    # Working state and configuration of ours: each row is the current value, not a record of a move.
    "core_api_tokens": "a credential's working state (its last use moves with every call); issued and revoked "
    "through core.tokens",
    "core_retention_passes": "the retention functions' own pass: the application may not write it at all",
    "ops_cluster_heartbeats": "the clusters' liveness, rewritten at every beat",
    "ops_notification_preferences": "a person's own choice of delivery, changed at will",
    "ops_tallies": "running counts folded from their events: derived, recomputable from the cases",
    "ops_tally_events": "the tallies' pending changes, folded (deleted) by each scrape",
    "api_idempotency_keys": "a cache of answers to repeated API calls, forgotten after a day",
    "api_rate_windows": "per-minute call counters, dropped as the minutes pass",
    "api_webhook_subscribers": "configuration (URL, secret, active), edited in the admin (recorded in its history)",
}

ROW, BEFORE, DELETE, UPDATE = 1, 2, 8, 16

pytestmark = pytest.mark.django_db(transaction=True)


def guards() -> dict[str, set[str]]:
    """Every table in schema public, with the operations its enabled BEFORE ROW triggers guard."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT c.relname, t.tgtype FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " LEFT JOIN pg_trigger t ON t.tgrelid = c.oid AND NOT t.tgisinternal AND t.tgenabled <> 'D'"
            " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')"
        )
        found: dict[str, set[str]] = {}
        for table, kind in cur.fetchall():
            ops = found.setdefault(table, set())
            if kind is not None and kind & ROW and kind & BEFORE:
                ops |= {op for bit, op in ((UPDATE, "UPDATE"), (DELETE, "DELETE")) if kind & bit}
    return found


@pytest.mark.django_db
def test_every_table_of_ours_guards_its_rows_or_says_why_not() -> None:
    tables = guards()
    unguarded = {t for t, ops in tables.items() if ops != {"UPDATE", "DELETE"}}
    assert unguarded - set(UNGUARDED) == set(), "guard these tables (or name them in UNGUARDED with a reason)"
    assert set(UNGUARDED) - set(tables) == set(), "UNGUARDED names a table that is gone"
    assert all(reason.strip() for reason in UNGUARDED.values())
    # The walk reads what it should: the records the issue names are among the guarded.
    for table in (
        "entity_deletion_alarms", "retirements_alarm", "retirements_noticeslot", "ops_notifications",
        "ops_records_holds", "api_webhook_deliveries", "django_admin_log", "registered_receivers",
        "entity_deletion_requests", "entity_deletion_decisions", "ops_tombstones",
    ):  # fmt: skip
        assert tables[table] == {"UPDATE", "DELETE"}, table


# -- retention's door ----------------------------------------------------------------------------


def open_case_with_history() -> DeletionRequest:
    """An open case with decisions, an approval, lease events, a stage and an attempt: a manual
    target's first effect, handed to an operator (needs attention)."""
    req = submit_and_approve("manual:vendor-crm/open@example.com")
    ran = run_command("run_deletion", str(req.id), "--executor-id", "worker-open")
    assert ran.code == 1 and "waiting for an operator" in ran.err, ran.err
    req = DeletionRequest.objects.get(id=req.id)
    assert req.status == "needs_attention"
    assert LeaseEvent.objects.filter(request=req).exists() and StageAttempt.objects.filter(request=req).exists()
    return req


def completed(target: str) -> DeletionRequest:
    req = submit_and_approve(target)
    ran = run_command("run_deletion", str(req.id), "--executor-id", "worker-closed")
    assert ran.code == 0, ran.err
    return DeletionRequest.objects.get(id=req.id)


CASE_ROWS = {
    "entity_deletion_decisions": "request_id",
    "entity_deletion_lease_events": "request_id",
    "entity_deletion_approvals": "request_id",
    "entity_deletion_stage_attempts": "request_id",
    "entity_deletion_stage_history": "request_id",
    "entity_deletion_alarms": "request_id",
    "entity_deletion_requests": "id",
}
REFUSALS = {  # what the database says to a DELETE of each
    "entity_deletion_decisions": "evidence rows are never rewritten or deleted",
    "entity_deletion_lease_events": "evidence rows are never rewritten or deleted",
    "entity_deletion_approvals": "evidence rows are never deleted",
    "entity_deletion_stage_attempts": "a finished attempt is evidence: never deleted (but by the retention job)",
    "entity_deletion_stage_history": "is evidence: never deleted (but by the retention job)",
    "entity_deletion_alarms": "an alarm is never deleted (but by the retention job)",
    "entity_deletion_requests": "a case's rows are deleted only by the retention job",
}


def count_rows(case_id: Any) -> dict[str, int]:
    with connection.cursor() as cur:
        out = {}
        for table, column in CASE_ROWS.items():
            cur.execute(f"SELECT count(*) FROM {table} WHERE {column} = %s", [case_id])
            out[table] = cur.fetchone()[0]  # type: ignore[index]
    return out


def refused_with_the_old_mark(conn: psycopg.Connection[Any], sql: str, *params: Any) -> str:
    """The refusal of `sql` in a transaction that set the retention setting (as any session may)."""
    try:
        with conn.transaction():
            conn.execute("SET LOCAL backoffice.retention = 'on'")
            conn.execute(sql, params)
    except psycopg.Error as exc:
        return str(exc).splitlines()[0]
    raise AssertionError(f"the database accepted, as {ROLE}, with the retention setting on: {sql}")


def test_the_retention_setting_opens_nothing_and_the_retention_functions_only_a_closed_case_past_its_period() -> None:
    still_open = open_case_with_history()
    held = completed("demo:held-gone")
    closed = completed("demo:closed-gone")
    retention.place_hold(actor=named("operator-b"), kind="deletion", case_id=held.id, reason="complaint 12 open")
    before = {r.id: count_rows(r.id) for r in (still_open, held, closed)}
    assert all(before[still_open.id][t] > 0 for t in CASE_ROWS), before

    with as_role() as conn:
        # The old door: any session may set the setting; it opens no row of any case any more.
        for table, column in CASE_ROWS.items():
            said = refused_with_the_old_mark(conn, f"DELETE FROM {table} WHERE {column} = %s", still_open.id)
            assert REFUSALS[table] in said, (table, said)
        for case in (held, closed):
            said = refused_with_the_old_mark(
                conn, "DELETE FROM entity_deletion_decisions WHERE request_id = %s", case.id
            )
            assert "never rewritten or deleted" in said, said
        # The pass is the retention functions' alone: the application may neither write it nor run
        # the deletions they run.
        assert "permission denied for table core_retention_passes" in refused(
            conn, "INSERT INTO core_retention_passes (xact) VALUES (pg_current_xact_id())"
        )
        assert "permission denied for function deletions_erase_case" in refused(
            conn, "SELECT deletions_erase_case(%s)", closed.id
        )
        assert "permission denied for function retention_admit" in refused(
            conn, "SELECT retention_admit('deletion', %s, 0)", closed.id
        )
        # The functions it may call check the case in the database, under its lock.
        erase = "SELECT retention_erase_case('deletion', %s, %s)"
        assert "is not a closed case: its rows are kept" in refused(conn, erase, still_open.id, 0)
        assert "is under a records hold: its rows are kept" in refused(conn, erase, held.id, 0)
        assert "within 30 days: its rows are kept" in refused(conn, erase, closed.id, 30)
        assert "has no tombstone" in refused(conn, erase, closed.id, 0)
        trim = "SELECT retention_drop_lease_history(%s, 0)"
        assert "is not a closed case" in refused(conn, trim, still_open.id)
        assert "is not a closed case" in refused(conn, "SELECT retention_drop_evidence(%s, 0)", still_open.id)
        assert "a period of -1 days is refused" in refused(conn, erase, closed.id, -1)
    assert {r: count_rows(r) for r in before} == before  # nothing of any of them went


@pytest.mark.django_db
def test_the_application_may_run_only_the_retention_functions_which_run_as_the_tables_owner() -> None:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT p.proname, p.prosecdef, pg_get_userbyid(p.proowner) = t.tableowner, p.proconfig,"
            " has_function_privilege(%s, p.oid, 'EXECUTE')"
            " FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " JOIN pg_tables t ON t.tablename = 'entity_deletion_requests'"
            " WHERE n.nspname = 'public' AND p.proname ~ '^(retention|deletions|retirements)_'",
            [ROLE],
        )
        functions = {name: rest for name, *rest in cur.fetchall()}
    callable_ = {name for name, (_, _, _, may) in functions.items() if may}
    assert callable_ == {
        "retention_erase_case", "retention_drop_lease_history", "retention_drop_evidence", "retention_forget"
    }  # fmt: skip
    for name in callable_:
        definer, owned, config, _ = functions[name]
        assert definer and owned and any(c.startswith("search_path=pg_catalog") for c in config), name
    assert {"retention_admit", "deletions_erase_case", "retirements_erase_case"} <= set(functions) - callable_


def test_the_retention_job_run_as_the_application_role_still_makes_a_tombstone_of_what_is_due() -> None:
    still_open = open_case_with_history()
    held = completed("demo:held-kept")
    closed = completed("demo:closed-erased")
    retention.place_hold(actor=named("operator-b"), kind="deletion", case_id=held.id, reason="legal request 7")
    LogEntry.objects.create(
        user=named("operator-b").user,
        content_type=ContentType.objects.get_for_model(DeletionRequest),
        object_id=str(closed.id),
        object_repr="closed",
        action_flag=CHANGE,
        change_message="checked",
    )
    before = {r.id: count_rows(r.id) for r in (still_open, held)}
    env = subprocess_env(DATABASE_URL=role_url())
    ran = subprocess.run(
        manage_argv("apply_retention", "--closed-case-days", "0"), cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    counts = json.loads(ran.stdout)["counts"]
    assert counts["deletion tombstones"] == 1 and counts["deletions kept: under a records hold"] == 1, counts
    assert counts["deletion rows deleted: history and notifications"] >= 1, counts
    assert set(count_rows(closed.id).values()) == {0}
    assert not LogEntry.objects.filter(object_id=str(closed.id)).exists()
    stone = Tombstone.objects.get(case_id=closed.id)
    assert (stone.case_kind, stone.outcome) == ("deletion", "completed")
    assert {r: count_rows(r) for r in before} == before  # the open case and the held one are untouched
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM core_retention_passes")
        assert cur.fetchone() == (0,)  # no pass outlives its function


# -- records of what happened ----------------------------------------------------------------------


def accepted(conn: psycopg.Connection[Any], sql: str, *params: Any) -> int:
    with conn.transaction():
        return conn.execute(sql, params).rowcount


def test_every_record_of_what_happened_is_append_only_for_the_application_role(cmd) -> None:
    from receiver import signing

    done = completed("demo:records")
    now = clock.now()
    deletion_alarm = DeletionAlarm.objects.create(request=done, kind="effect_unknown", message="m", created_at=now)
    assert cmd("create_workspace", "--slug", "ws-records", "--name", "Records", "--disabled").code == 0
    asked = cmd("request_retirement", "--workspace", "ws-records", "--requested-by", "operator-a", "--reason", "r",
                "--confirm", "ws-records")  # fmt: skip
    retirement = RetirementRequest.objects.get(id=json.loads(asked.out)["id"])
    slots = list(NoticeSlot.objects.filter(request=retirement).order_by("id"))
    force(NoticeSlot.objects.filter(id=slots[0].id), status="delivered", delivered_at=now)  # as a restore would
    force(NoticeSlot.objects.filter(id=slots[1].id), status="suppressed")
    retirement_alarm = Alarm.objects.create(request=retirement, kind="watcher_failing", message="m", created_at=now)
    sent = Notification.objects.create(
        recipient=named("operator-b").user, key="k", event="approval_waiting", case_kind="deletion",
        case_id=done.id, subject="s", body="b", status="sent", sent_at=now, created_at=now,
    )  # fmt: skip
    hold = retention.place_hold(actor=named("operator-b"), kind="deletion", case_id=done.id, reason="complaint")
    subscriber = WebhookSubscriber.objects.create(name="s", url="http://x.invalid", secret="s", created_at=now)
    told = WebhookDelivery.objects.create(
        subscriber=subscriber, event="deletion.approved", case_kind="deletion", case_id=done.id, payload={},
        status="delivered", delivered_at=now, created_at=now, next_attempt_at=now,
    )  # fmt: skip
    waiting = WebhookDelivery.objects.create(
        subscriber=subscriber, event="deletion.completed", case_kind="deletion", case_id=done.id, payload={},
        created_at=now, next_attempt_at=now,
    )  # fmt: skip
    entry = LogEntry.objects.create(
        user=named("operator-b").user, content_type=ContentType.objects.get_for_model(DeletionRequest),
        object_id=str(done.id), object_repr="r", action_flag=CHANGE, change_message="looked",
    )  # fmt: skip
    run = RetentionRun.objects.create(started_at=now, finished_at=now)
    stone = Tombstone.objects.create(
        case_kind="deletion", case_id=retirement.id, opened_at=now, closed_at=now, outcome="completed",
        proof_digest="sha256:x", made_at=now, run=run,
    )  # fmt: skip
    withdrawal = AuthorityWithdrawal.objects.create(
        request=done, epoch=9, cause="c", created_at=now, acknowledged_at=now, acknowledged_where="w"
    )
    kid = signing.key_id()

    with as_role() as conn:
        # Alarms: resolved once (who and why with it, when a person closes one), then never again.
        for table, alarm in (("entity_deletion_alarms", deletion_alarm), ("retirements_alarm", retirement_alarm)):
            assert "is never rewritten; only resolved_at may be set, once" in refused(
                conn, f"UPDATE {table} SET message = 'nothing happened' WHERE id = %s", alarm.id
            )
            assert "never rewritten" in refused(
                conn, f"UPDATE {table} SET resolved_at = now(), message = 'fine' WHERE id = %s", alarm.id
            )
            assert accepted(conn, f"UPDATE {table} SET resolved_at = now() WHERE id = %s", alarm.id) == 1
            assert "never rewritten" in refused(conn, f"UPDATE {table} SET resolved_at = NULL WHERE id = %s", alarm.id)
            assert "never rewritten" in refused(
                conn, f"UPDATE {table} SET resolved_at = resolved_at - interval '10 days' WHERE id = %s", alarm.id
            )
            assert "an alarm is never deleted" in refused(conn, f"DELETE FROM {table} WHERE id = %s", alarm.id)
        # Notice slots once delivered or suppressed: their status and delivered_at never rewritten.
        never = "a delivered or suppressed notice is evidence once final: never rewritten"
        back = "UPDATE retirements_noticeslot SET delivered_at = delivered_at - interval '10 days' WHERE id = %s"
        assert never in refused(conn, back, slots[0].id)
        assert never in refused(conn, "UPDATE retirements_noticeslot SET last_error = 'x' WHERE id = %s", slots[1].id)
        for slot in slots[:2]:
            assert "never deleted" in refused(conn, "DELETE FROM retirements_noticeslot WHERE id = %s", slot.id)
        # Sent notifications: never rewritten or deleted.
        assert "a sent notification is evidence once final" in refused(
            conn, "UPDATE ops_notifications SET body = 'other words' WHERE id = %s", sent.id
        )
        assert "never deleted" in refused(conn, "DELETE FROM ops_notifications WHERE id = %s", sent.id)
        # Records holds: released once, by a decision (who and why), never deleted.
        assert "a records hold is never deleted" in refused(
            conn, "DELETE FROM ops_records_holds WHERE id = %s", hold.id
        )
        assert "never rewritten" in refused(conn, "UPDATE ops_records_holds SET reason = 'x' WHERE id = %s", hold.id)
        assert "records_hold_released_by_a_person_with_a_reason" in refused(
            conn, "UPDATE ops_records_holds SET released_at = now() WHERE id = %s", hold.id
        )  # released by a decision: who and why, with it
        release = (
            "UPDATE ops_records_holds SET released_at = now(), released_by_id = placed_by_id,"
            " release_reason = 'closed' WHERE id = %s"
        )
        assert accepted(conn, release, hold.id) == 1
        assert "never rewritten" in refused(
            conn, "UPDATE ops_records_holds SET released_at = NULL WHERE id = %s", hold.id
        )
        # Webhook deliveries once final; a waiting one is still the outbox's own.
        assert "never rewritten" in refused(
            conn, "UPDATE api_webhook_deliveries SET last_status = 200 WHERE id = %s", told.id
        )
        assert "never deleted" in refused(conn, "DELETE FROM api_webhook_deliveries WHERE id = %s", told.id)
        assert accepted(conn, "DELETE FROM api_webhook_deliveries WHERE id = %s", waiting.id) == 1
        # Django's admin history: appended to, never rewritten or deleted.
        history = "the admin's history is never rewritten or deleted"
        assert history in refused(conn, "UPDATE django_admin_log SET change_message = 'x' WHERE id = %s", entry.id)
        assert history in refused(conn, "DELETE FROM django_admin_log WHERE id = %s", entry.id)
        # What the retention job leaves and logs.
        assert "never rewritten or deleted" in refused(
            conn, "UPDATE ops_tombstones SET outcome = 'x' WHERE id = %s", stone.id
        )
        assert "never rewritten or deleted" in refused(conn, "DELETE FROM ops_tombstones WHERE id = %s", stone.id)
        assert "never rewritten" in refused(conn, "UPDATE ops_retention_runs SET counts = '{}' WHERE id = %s", run.id)
        assert "an acknowledged withdrawal is evidence" in refused(
            conn,
            "UPDATE entity_deletion_authority_withdrawals SET acknowledged_at = now() WHERE id = %s",
            withdrawal.id,
        )
        assert "deleted only by the retention job" in refused(
            conn, "DELETE FROM entity_deletion_requests WHERE id = %s", done.id
        )
        # The receivers' keys: a key the saved evidence cites is never rewritten or retired; one is
        # added; the rest of the registration moves.
        cited = f"key {kid} of demo: is cited by saved evidence"
        other_key = "A" * 43
        demo = "WHERE prefix = 'demo:'"
        assert cited in refused(conn, f"UPDATE registered_receivers SET keys = jsonb_set(keys, %s, %s) {demo}",
                                [kid], json.dumps(other_key))  # fmt: skip
        assert cited in refused(conn, f"UPDATE registered_receivers SET keys = keys - %s {demo}", kid)
        assert cited in refused(conn, f"UPDATE registered_receivers SET prefix = 'moved:' {demo}")
        assert cited in refused(conn, f"DELETE FROM registered_receivers {demo}")
        added = f"UPDATE registered_receivers SET keys = keys || jsonb_build_object('receiver-9', %s::text) {demo}"
        assert accepted(conn, added, other_key) == 1
        assert accepted(conn, f"UPDATE registered_receivers SET keys = keys - 'receiver-9' {demo}") == 1  # not cited
        assert accepted(conn, f"UPDATE registered_receivers SET unanswered_since = now() {demo}") == 1
    # Nothing refused changed anything.
    assert NoticeSlot.objects.get(id=slots[0].id).status == "delivered"
    assert Notification.objects.get(id=sent.id).body == "b"
    assert LogEntry.objects.get(id=entry.id).change_message == "looked"
    assert RecordsHold.objects.get(id=hold.id).release_reason == "closed"
    assert DeletionAlarm.objects.get(id=deletion_alarm.id).message == "m"
    assert WebhookDelivery.objects.filter(id=told.id, status="delivered").exists()
    assert not WebhookDelivery.objects.filter(id=waiting.id).exists()
