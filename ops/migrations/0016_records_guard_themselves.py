"""The records guard themselves (issue 51 items 3-4): retention's door, narrowed in the database.

The evidence triggers let a DELETE through only while this transaction holds a retention pass
(`core_retention_passes`, core 0004), and only the functions here write one: SECURITY DEFINER,
owned by the migration role (who runs `migrate`), executable by the application's role and by
nobody else. Each first checks, in the database, that the case is closed, past the period it is
given and under no records hold, and that its investigation is not open (`retention_admit`, over
the view `retention_cases`, which the job's candidates read too: one rule), locking the case row;
then it opens the pass, runs the workflow's own deletion (deletions 0027, retirements 0019), and
closes the pass before it returns. Nothing the application sets or runs opens a guard itself.

And: a sent notification is never rewritten or deleted (but by retention); a records hold is
released once, by a person with a reason, never deleted; a tombstone is append-only; a finished retention run is never
rewritten.
"""

import pgtrigger.compiler
import pgtrigger.migrations
from django.conf import settings
from django.db import migrations, models

FUNCTIONS = """
CREATE VIEW retention_cases AS
SELECT 'deletion'::text AS case_kind, r.id AS case_id, COALESCE(r.completed_at, r.updated_at) AS closed_at,
       EXISTS (SELECT 1 FROM ops_records_holds h
               WHERE h.case_kind = 'deletion' AND h.case_id = r.id AND h.released_at IS NULL) AS held,
       EXISTS (SELECT 1 FROM entity_deletion_alarms a WHERE a.request_id = r.id AND a.resolved_at IS NULL)
       OR EXISTS (SELECT 1 FROM entity_deletion_authority_withdrawals w
                  WHERE w.request_id = r.id AND w.acknowledged_at IS NULL) AS investigating
FROM entity_deletion_requests r
WHERE r.status IN ('completed', 'cancelled')
UNION ALL
SELECT 'retirement', r.id, COALESCE(r.concluded_at, r.updated_at),
       EXISTS (SELECT 1 FROM ops_records_holds h
               WHERE h.case_kind = 'retirement' AND h.case_id = r.id AND h.released_at IS NULL),
       EXISTS (SELECT 1 FROM retirements_alarm a WHERE a.request_id = r.id AND a.resolved_at IS NULL)
FROM retirements_retirementrequest r
WHERE r.status IN ('completed', 'cancelled', 'closed');
COMMENT ON VIEW retention_cases IS
    'Closed cases, when they closed, and what keeps them (a records hold, an open investigation).';

CREATE FUNCTION retention_admit(which text, one_case uuid, period_days integer) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    c record;
BEGIN
    IF period_days IS NULL OR period_days < 0 THEN
        RAISE EXCEPTION 'retention: a period of % days is refused: a number of days, 0 or more', period_days
            USING ERRCODE = '22023';
    END IF;
    -- The case row first: a records hold placed meanwhile waits for this transaction, and sees it gone.
    IF which = 'deletion' THEN
        PERFORM 1 FROM entity_deletion_requests WHERE id = one_case FOR UPDATE;
    ELSIF which = 'retirement' THEN
        PERFORM 1 FROM retirements_retirementrequest WHERE id = one_case FOR UPDATE;
    ELSE
        RAISE EXCEPTION 'retention: no case kind %', which USING ERRCODE = '22023';
    END IF;
    SELECT * INTO c FROM retention_cases v WHERE v.case_kind = which AND v.case_id = one_case;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'retention: % % is not a closed case: its rows are kept', which, one_case
            USING ERRCODE = '23514';
    ELSIF c.closed_at > statement_timestamp() - make_interval(days => period_days) THEN
        RAISE EXCEPTION 'retention: % % closed at %, within % days: its rows are kept', which, one_case,
            c.closed_at, period_days USING ERRCODE = '23514';
    ELSIF c.held THEN
        RAISE EXCEPTION 'retention: % % is under a records hold: its rows are kept', which, one_case
            USING ERRCODE = '23514';
    ELSIF c.investigating THEN
        RAISE EXCEPTION 'retention: % %''s investigation is open: its rows are kept', which, one_case
            USING ERRCODE = '23514';
    END IF;
END $$;

CREATE FUNCTION retention_erase_case(which text, one_case uuid, period_days integer) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    counts jsonb;
    v_app text;
    v_model text;
    elsewhere bigint;
BEGIN
    PERFORM retention_admit(which, one_case, period_days);
    IF NOT EXISTS (SELECT 1 FROM ops_tombstones t WHERE t.case_kind = which AND t.case_id = one_case) THEN
        RAISE EXCEPTION 'retention: % % has no tombstone: what stays of a case is written first', which, one_case
            USING ERRCODE = '23514';
    END IF;
    INSERT INTO core_retention_passes (xact) VALUES (pg_current_xact_id()) ON CONFLICT DO NOTHING;
    IF which = 'deletion' THEN
        counts := deletions_erase_case(one_case);
        v_app := 'deletions';
        v_model := 'deletionrequest';
    ELSE
        counts := retirements_erase_case(one_case);
        v_app := 'retirements';
        v_model := 'retirementrequest';
    END IF;
    -- What names the case elsewhere goes with it: Django's history of it, its notifications and
    -- its webhook deliveries.
    WITH logs AS (
        DELETE FROM django_admin_log l USING django_content_type ct
        WHERE l.content_type_id = ct.id AND ct.app_label = v_app AND ct.model = v_model
          AND l.object_id = one_case::text
        RETURNING l.id
    ), told AS (
        DELETE FROM api_webhook_deliveries d WHERE d.case_kind = which AND d.case_id = one_case RETURNING d.id
    ), notes AS (
        DELETE FROM ops_notifications n WHERE n.case_kind = which AND n.case_id = one_case RETURNING n.id
    )
    SELECT (SELECT count(*) FROM logs) + (SELECT count(*) FROM told) + (SELECT count(*) FROM notes) INTO elsewhere;
    DELETE FROM core_retention_passes WHERE xact = pg_current_xact_id();
    RETURN counts || jsonb_build_object('history and notifications', elsewhere);
END $$;

CREATE FUNCTION retention_drop_lease_history(one_case uuid, period_days integer) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM retention_admit('deletion', one_case, period_days);
    INSERT INTO core_retention_passes (xact) VALUES (pg_current_xact_id()) ON CONFLICT DO NOTHING;
    n := deletions_drop_lease_history(one_case);
    DELETE FROM core_retention_passes WHERE xact = pg_current_xact_id();
    RETURN n;
END $$;

CREATE FUNCTION retention_drop_evidence(one_case uuid, period_days integer) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM retention_admit('deletion', one_case, period_days);
    INSERT INTO core_retention_passes (xact) VALUES (pg_current_xact_id()) ON CONFLICT DO NOTHING;
    n := deletions_drop_evidence(one_case);
    DELETE FROM core_retention_passes WHERE xact = pg_current_xact_id();
    RETURN n;
END $$;

-- Sent notifications and final webhook deliveries past their period (at most `most` of each), but
-- a held case's; with `dry`, only counted.
CREATE FUNCTION retention_forget(period_days integer, most integer, dry boolean) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    cutoff timestamptz;
    notes bigint;
    told bigint;
BEGIN
    IF period_days IS NULL OR period_days < 0 OR most IS NULL OR most < 1 THEN
        RAISE EXCEPTION 'retention: % days and % rows are refused', period_days, most USING ERRCODE = '22023';
    END IF;
    cutoff := statement_timestamp() - make_interval(days => period_days);
    IF NOT dry THEN
        INSERT INTO core_retention_passes (xact) VALUES (pg_current_xact_id()) ON CONFLICT DO NOTHING;
    END IF;
    WITH old AS (
        SELECT n.id FROM ops_notifications n
        WHERE n.status IN ('sent', 'digested', 'failed') AND n.created_at < cutoff
          AND NOT EXISTS (SELECT 1 FROM ops_records_holds h
                          WHERE h.case_kind = n.case_kind AND h.case_id = n.case_id AND h.released_at IS NULL)
        LIMIT most
    ), gone AS (
        DELETE FROM ops_notifications n USING old WHERE n.id = old.id AND NOT dry RETURNING n.id
    )
    SELECT CASE WHEN dry THEN (SELECT count(*) FROM old) ELSE (SELECT count(*) FROM gone) END INTO notes;
    WITH old AS (
        SELECT d.id FROM api_webhook_deliveries d
        WHERE d.status IN ('delivered', 'failed') AND d.created_at < cutoff
          AND NOT EXISTS (SELECT 1 FROM ops_records_holds h
                          WHERE h.case_kind = d.case_kind AND h.case_id = d.case_id AND h.released_at IS NULL)
        LIMIT most
    ), gone AS (
        DELETE FROM api_webhook_deliveries d USING old WHERE d.id = old.id AND NOT dry RETURNING d.id
    )
    SELECT CASE WHEN dry THEN (SELECT count(*) FROM old) ELSE (SELECT count(*) FROM gone) END INTO told;
    DELETE FROM core_retention_passes WHERE xact = pg_current_xact_id();
    RETURN jsonb_build_object('notifications', notes, 'webhook deliveries', told);
END $$;

REVOKE ALL ON FUNCTION retention_admit(text, uuid, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION retention_erase_case(text, uuid, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION retention_drop_lease_history(uuid, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION retention_drop_evidence(uuid, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION retention_forget(integer, integer, boolean) FROM PUBLIC;
"""

UNDO = """
DROP FUNCTION IF EXISTS retention_forget(integer, integer, boolean);
DROP FUNCTION IF EXISTS retention_drop_evidence(uuid, integer);
DROP FUNCTION IF EXISTS retention_drop_lease_history(uuid, integer);
DROP FUNCTION IF EXISTS retention_erase_case(text, uuid, integer);
DROP FUNCTION IF EXISTS retention_admit(text, uuid, integer);
DROP VIEW IF EXISTS retention_cases;
"""

CALLED = (
    "retention_erase_case(text, uuid, integer)",
    "retention_drop_lease_history(uuid, integer)",
    "retention_drop_evidence(uuid, integer)",
    "retention_forget(integer, integer, boolean)",
)


def the_application_calls_them(apps, schema_editor) -> None:
    connection = schema_editor.connection
    if connection.alias != "default":
        return
    role = connection.ops.quote_name(settings.DATABASE_APP_ROLE)
    with connection.cursor() as cur:
        for function in CALLED:
            cur.execute(f"GRANT EXECUTE ON FUNCTION {function} TO {role}")


class Migration(migrations.Migration):
    dependencies = [
        ("ops", "0015_recipient_index_is_the_wider_one"),
        ("core", "0004_records_guard_themselves"),
        ("deletions", "0027_records_guard_themselves"),
        ("retirements", "0019_records_guard_themselves"),
        ("api", "0005_records_guard_themselves"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="recordshold",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("released_at__isnull", True),
                    models.Q(("released_by__isnull", False), models.Q(("release_reason", ""), _negated=True)),
                    _connector="OR",
                ),
                name="records_hold_released_by_a_person_with_a_reason",
            ),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='notification',
            trigger=pgtrigger.compiler.Trigger(name='sent_notification_is_evidence', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; IF TG_OP = 'DELETE' THEN RAISE EXCEPTION '%: a sent notification is evidence: never deleted (but by the retention job)', TG_TABLE_NAME USING ERRCODE = '23514'; END IF; IF NOT (OLD.status IN ('sent', 'digested', 'failed')) OR (false) OR (EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) AND (false)) THEN RETURN NEW; END IF; RAISE EXCEPTION '%: a sent notification is evidence once final: never rewritten', TG_TABLE_NAME USING ERRCODE = '23514';", hash='6348625c22a9547131fb64eee6506d2cb7f93816', operation='UPDATE OR DELETE', pgid='pgtrigger_sent_notification_is_evidence_c75ac', table='ops_notifications', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='recordshold',
            trigger=pgtrigger.compiler.Trigger(name='released_once', sql=pgtrigger.compiler.UpsertTriggerSql(func='IF TG_OP = \'DELETE\' THEN RAISE EXCEPTION \'%: a records hold is never deleted\', TG_TABLE_NAME USING ERRCODE = \'23514\'; END IF; IF OLD."released_at" IS NULL AND NEW."released_at" IS NOT NULL AND (to_jsonb(NEW) - ARRAY(SELECT k FROM jsonb_object_keys(to_jsonb(OLD)) AS k WHERE starts_with(k, \'release\'))) = (to_jsonb(OLD) - ARRAY(SELECT k FROM jsonb_object_keys(to_jsonb(OLD)) AS k WHERE starts_with(k, \'release\'))) THEN RETURN NEW; END IF; RAISE EXCEPTION \'%: a records hold is never rewritten; only released_at may be set, once (with its release* columns)\', TG_TABLE_NAME USING ERRCODE = \'23514\';', hash='b9084470d67e9c00f7cb39a0ed6e84dce32b8710', operation='UPDATE OR DELETE', pgid='pgtrigger_released_once_dcbd1', table='ops_records_holds', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='tombstone',
            trigger=pgtrigger.compiler.Trigger(name='tombstones_append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; RAISE EXCEPTION '%: evidence rows are never rewritten or deleted', TG_TABLE_NAME USING ERRCODE = '23514';", hash='2601c75398035bb712e65026ebe615b3e0c88ca3', operation='UPDATE OR DELETE', pgid='pgtrigger_tombstones_append_only_79443', table='ops_tombstones', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='retentionrun',
            trigger=pgtrigger.compiler.Trigger(name='finished_run_is_evidence', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; IF TG_OP = 'DELETE' THEN RAISE EXCEPTION '%: a finished retention run is evidence: never deleted (but by the retention job)', TG_TABLE_NAME USING ERRCODE = '23514'; END IF; IF NOT (OLD.finished_at IS NOT NULL) OR (false) OR (EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) AND (false)) THEN RETURN NEW; END IF; RAISE EXCEPTION '%: a finished retention run is evidence once final: never rewritten', TG_TABLE_NAME USING ERRCODE = '23514';", hash='f1788b888f1800f9b85bc7b77e3b86db9974365f', operation='UPDATE OR DELETE', pgid='pgtrigger_finished_run_is_evidence_7f441', table='ops_retention_runs', when='BEFORE')),
        ),
        migrations.RunSQL(FUNCTIONS, UNDO),
        migrations.RunPython(the_application_calls_them, migrations.RunPython.noop, elidable=False),
    ]
