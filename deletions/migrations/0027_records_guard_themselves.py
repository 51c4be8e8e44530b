"""The records guard themselves (issue 51 items 3-4).

Retention's door, narrowed in the database: the evidence triggers let a DELETE through only while a
retention function holds its pass for the transaction (`core_retention_passes`, core 0004), never
because of a setting a session may set. The functions that open it are ops 0016's (SECURITY
DEFINER, for one closed case past its period under no records hold); the deletions they run on this
app's tables are these, which the application may not call itself.

And the records with no guard so far: a request is deleted only by retention; an alarm is resolved
once (with the decision that closes it), never rewritten or deleted but by retention; an
acknowledged withdrawal is evidence; a registered receiver's key that saved evidence cites is never
rewritten or retired.
"""

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations

ERASE = """
CREATE FUNCTION deletions_erase_case(one_case uuid) RETURNS jsonb LANGUAGE sql
SET search_path = pg_catalog, public, pg_temp AS $$
WITH req AS (
    SELECT id FROM entity_deletion_requests WHERE id = one_case AND status IN ('completed', 'cancelled')
), attempts AS (
    DELETE FROM entity_deletion_stage_attempts a USING req WHERE a.request_id = req.id RETURNING a.id
), events AS (
    DELETE FROM entity_deletion_lease_events e USING req WHERE e.request_id = req.id RETURNING e.id
), alarms AS (
    DELETE FROM entity_deletion_alarms al USING req WHERE al.request_id = req.id RETURNING al.id
), withdrawals AS (
    DELETE FROM entity_deletion_authority_withdrawals w USING req WHERE w.request_id = req.id RETURNING w.id
), records AS (
    DELETE FROM entity_deletion_operator_records o USING req WHERE o.request_id = req.id RETURNING o.id
), decisions AS (
    DELETE FROM entity_deletion_decisions d USING req WHERE d.request_id = req.id RETURNING d.id
), approvals AS (
    DELETE FROM entity_deletion_approvals ap USING req WHERE ap.request_id = req.id RETURNING ap.id
), stages AS (
    DELETE FROM entity_deletion_stage_history s USING req WHERE s.request_id = req.id RETURNING s.id
), request AS (
    DELETE FROM entity_deletion_requests r USING req WHERE r.id = req.id RETURNING r.id
)
SELECT jsonb_build_object(
    'requests', (SELECT count(*) FROM request), 'stages', (SELECT count(*) FROM stages),
    'approvals', (SELECT count(*) FROM approvals), 'decisions', (SELECT count(*) FROM decisions),
    'lease_history', (SELECT count(*) FROM attempts) + (SELECT count(*) FROM events),
    'other', (SELECT count(*) FROM alarms) + (SELECT count(*) FROM withdrawals) + (SELECT count(*) FROM records)
)
$$;

CREATE FUNCTION deletions_drop_lease_history(one_case uuid) RETURNS bigint LANGUAGE sql
SET search_path = pg_catalog, public, pg_temp AS $$
WITH req AS (
    SELECT id FROM entity_deletion_requests WHERE id = one_case AND status IN ('completed', 'cancelled')
), attempts AS (
    DELETE FROM entity_deletion_stage_attempts a USING req WHERE a.request_id = req.id RETURNING a.id
), events AS (
    DELETE FROM entity_deletion_lease_events e USING req WHERE e.request_id = req.id RETURNING e.id
)
SELECT (SELECT count(*) FROM attempts) + (SELECT count(*) FROM events)
$$;

CREATE FUNCTION deletions_drop_evidence(one_case uuid) RETURNS bigint LANGUAGE sql
SET search_path = pg_catalog, public, pg_temp AS $$
WITH dropped AS (
    UPDATE entity_deletion_stage_history s SET metadata_json = s.metadata_json - 'result'
    FROM entity_deletion_requests r
    WHERE s.request_id = r.id AND r.id = one_case AND r.status IN ('completed', 'cancelled')
      AND s.metadata_json ? 'result'
    RETURNING s.id
)
SELECT count(*) FROM dropped
$$;

-- Run only by the retention functions (ops 0016), as their owner: never by the application.
REVOKE ALL ON FUNCTION deletions_erase_case(uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION deletions_drop_lease_history(uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION deletions_drop_evidence(uuid) FROM PUBLIC;
"""

UNERASE = """
DROP FUNCTION IF EXISTS deletions_erase_case(uuid);
DROP FUNCTION IF EXISTS deletions_drop_lease_history(uuid);
DROP FUNCTION IF EXISTS deletions_drop_evidence(uuid);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("deletions", "0026_receiver_unanswered_since"),
        ("core", "0004_records_guard_themselves"),
    ]

    operations = [
        pgtrigger.migrations.RemoveTrigger(
            model_name="deletionapproval",
            name="approval_is_evidence",
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="deletionapproval",
            trigger=pgtrigger.compiler.Trigger(
                name="approval_is_evidence",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func="IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; IF TG_OP = 'DELETE' THEN RAISE EXCEPTION '%: evidence rows are never deleted', TG_TABLE_NAME USING ERRCODE = '23514'; END IF; IF (to_jsonb(OLD) - 'revoked_at') IS DISTINCT FROM (to_jsonb(NEW) - 'revoked_at') OR OLD.\"revoked_at\" IS NOT NULL OR NEW.\"revoked_at\" IS NULL THEN RAISE EXCEPTION '%: evidence rows are never rewritten; only revoked_at may be set, once', TG_TABLE_NAME USING ERRCODE = '23514'; END IF; RETURN NEW;",
                    hash="88ac613230528a62669a81d97f69bdc4609c48a4",
                    operation="UPDATE OR DELETE",
                    pgid="pgtrigger_approval_is_evidence_80e67",
                    table="entity_deletion_approvals",
                    when="BEFORE",
                ),
            ),
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name="deletiondecision",
            name="append_only",
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="deletiondecision",
            trigger=pgtrigger.compiler.Trigger(
                name="append_only",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func="IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; RAISE EXCEPTION '%: evidence rows are never rewritten or deleted', TG_TABLE_NAME USING ERRCODE = '23514';",
                    hash="399478c37195c8eb714baafd0567ffc0ffaefc3d",
                    operation="UPDATE OR DELETE",
                    pgid="pgtrigger_append_only_fd4d7",
                    table="entity_deletion_decisions",
                    when="BEFORE",
                ),
            ),
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name="operatorrecord",
            name="operator_records_append_only",
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="operatorrecord",
            trigger=pgtrigger.compiler.Trigger(
                name="operator_records_append_only",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func="IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; RAISE EXCEPTION '%: evidence rows are never rewritten or deleted', TG_TABLE_NAME USING ERRCODE = '23514';",
                    hash="9d57aa19852969ee18af7585602a390ae169b560",
                    operation="UPDATE OR DELETE",
                    pgid="pgtrigger_operator_records_append_only_7b748",
                    table="entity_deletion_operator_records",
                    when="BEFORE",
                ),
            ),
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name="leaseevent",
            name="lease_events_append_only",
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="leaseevent",
            trigger=pgtrigger.compiler.Trigger(
                name="lease_events_append_only",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func="IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; RAISE EXCEPTION '%: evidence rows are never rewritten or deleted', TG_TABLE_NAME USING ERRCODE = '23514';",
                    hash="12f8b1fd0b3bbabc80d8337d0e8edc780a972345",
                    operation="UPDATE OR DELETE",
                    pgid="pgtrigger_lease_events_append_only_4b438",
                    table="entity_deletion_lease_events",
                    when="BEFORE",
                ),
            ),
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name="stageattempt",
            name="finished_attempt_is_evidence",
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="stageattempt",
            trigger=pgtrigger.compiler.Trigger(
                name="finished_attempt_is_evidence",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func="IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; IF TG_OP = 'DELETE' THEN RAISE EXCEPTION '%: a finished attempt is evidence: never deleted (but by the retention job)', TG_TABLE_NAME USING ERRCODE = '23514'; END IF; IF NOT (OLD.outcome <> 'running') OR ((to_jsonb(NEW) - 'error') = (to_jsonb(OLD) - 'error') AND (NEW.error = OLD.error OR (OLD.outcome = 'interrupted' AND OLD.error = ''))) OR (EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) AND (false)) THEN RETURN NEW; END IF; RAISE EXCEPTION '%: a finished attempt is evidence once final: never rewritten', TG_TABLE_NAME USING ERRCODE = '23514';",
                    hash="883028a34c9cb6941fe414ba9428bb95cab30dea",
                    operation="UPDATE OR DELETE",
                    pgid="pgtrigger_finished_attempt_is_evidence_9d39d",
                    table="entity_deletion_stage_attempts",
                    when="BEFORE",
                ),
            ),
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name="stagehistory",
            name="completed_stage_is_evidence",
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="stagehistory",
            trigger=pgtrigger.compiler.Trigger(
                name="completed_stage_is_evidence",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func="IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; IF TG_OP = 'DELETE' THEN RAISE EXCEPTION '%: a completed stage is evidence: never deleted (but by the retention job)', TG_TABLE_NAME USING ERRCODE = '23514'; END IF; IF NOT (OLD.status = 'completed') OR ((to_jsonb(NEW) - 'is_current' - 'metadata_json') = (to_jsonb(OLD) - 'is_current' - 'metadata_json') AND (NEW.is_current = OLD.is_current OR NOT NEW.is_current) AND (NEW.metadata_json - 'decision') = (OLD.metadata_json - 'decision') AND (NOT OLD.metadata_json ? 'decision' OR NEW.metadata_json -> 'decision' = OLD.metadata_json -> 'decision')) OR (EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) AND ((to_jsonb(NEW) - 'metadata_json') = (to_jsonb(OLD) - 'metadata_json') AND NEW.metadata_json = OLD.metadata_json - 'result')) THEN RETURN NEW; END IF; RAISE EXCEPTION '%: a completed stage is evidence once final: never rewritten', TG_TABLE_NAME USING ERRCODE = '23514';",
                    hash="962e6609f6b615d0f0dc80ab071f545b12ff4ff1",
                    operation="UPDATE OR DELETE",
                    pgid="pgtrigger_completed_stage_is_evidence_20daa",
                    table="entity_deletion_stage_history",
                    when="BEFORE",
                ),
            ),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="deletionrequest",
            trigger=pgtrigger.compiler.Trigger(
                name="deleted_only_by_retention",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func="IF EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; RAISE EXCEPTION '%: a case''s rows are deleted only by the retention job', TG_TABLE_NAME USING ERRCODE = '23514';",
                    hash="38c366de4f7b0a3a429a0bd5d3352dcebab9e63f",
                    operation="DELETE",
                    pgid="pgtrigger_deleted_only_by_retention_8d37f",
                    table="entity_deletion_requests",
                    when="BEFORE",
                ),
            ),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="deletionalarm",
            trigger=pgtrigger.compiler.Trigger(
                name="resolved_once",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func="IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; IF TG_OP = 'DELETE' THEN RAISE EXCEPTION '%: an alarm is never deleted (but by the retention job)', TG_TABLE_NAME USING ERRCODE = '23514'; END IF; IF OLD.\"resolved_at\" IS NULL AND NEW.\"resolved_at\" IS NOT NULL AND (to_jsonb(NEW) - ARRAY(SELECT k FROM jsonb_object_keys(to_jsonb(OLD)) AS k WHERE starts_with(k, 'resolved') OR starts_with(k, 'decision'))) = (to_jsonb(OLD) - ARRAY(SELECT k FROM jsonb_object_keys(to_jsonb(OLD)) AS k WHERE starts_with(k, 'resolved') OR starts_with(k, 'decision'))) THEN RETURN NEW; END IF; RAISE EXCEPTION '%: an alarm is never rewritten; only resolved_at may be set, once (with its resolved*/decision* columns)', TG_TABLE_NAME USING ERRCODE = '23514';",
                    hash="97f14c97b565cfb097d226fc7ef6e3b59cbc443b",
                    operation="UPDATE OR DELETE",
                    pgid="pgtrigger_resolved_once_03da9",
                    table="entity_deletion_alarms",
                    when="BEFORE",
                ),
            ),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="authoritywithdrawal",
            trigger=pgtrigger.compiler.Trigger(
                name="acknowledged_withdrawal_is_evidence",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func="IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; IF TG_OP = 'DELETE' THEN RAISE EXCEPTION '%: an acknowledged withdrawal is evidence: never deleted (but by the retention job)', TG_TABLE_NAME USING ERRCODE = '23514'; END IF; IF NOT (OLD.acknowledged_at IS NOT NULL) OR (false) OR (EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) AND (false)) THEN RETURN NEW; END IF; RAISE EXCEPTION '%: an acknowledged withdrawal is evidence once final: never rewritten', TG_TABLE_NAME USING ERRCODE = '23514';",
                    hash="21c79a0170aa71cf08952f555eafa5272324582e",
                    operation="UPDATE OR DELETE",
                    pgid="pgtrigger_acknowledged_withdrawal_is_evidence_3253d",
                    table="entity_deletion_authority_withdrawals",
                    when="BEFORE",
                ),
            ),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="targetsystem",
            trigger=pgtrigger.compiler.Trigger(
                name="cited_keys_are_kept",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    declare="DECLARE kid text;",
                    func="IF TG_OP = 'UPDATE' AND NEW.keys = OLD.keys AND NEW.prefix = OLD.prefix THEN RETURN NEW; END IF; FOR kid IN SELECT k FROM jsonb_object_keys(OLD.keys) AS k LOOP CONTINUE WHEN TG_OP = 'UPDATE' AND NEW.prefix = OLD.prefix AND NEW.keys -> kid = OLD.keys -> kid; IF EXISTS (SELECT 1 FROM public.entity_deletion_requests r JOIN public.entity_deletion_stage_history s ON s.request_id = r.id WHERE starts_with(r.target, OLD.prefix) AND s.metadata_json -> 'result' ? 'receipt' AND convert_from(decode(rpad(translate(split_part(s.metadata_json -> 'result' ->> 'receipt', '.', 1), '-_', '+/'), (length(split_part(s.metadata_json -> 'result' ->> 'receipt', '.', 1)) + 3) / 4 * 4, '='), 'base64'), 'UTF8')::jsonb ->> 'kid' = kid) THEN RAISE EXCEPTION '%: key % of % is cited by saved evidence: it is never rewritten or retired', TG_TABLE_NAME, kid, OLD.prefix USING ERRCODE = '23514'; END IF; END LOOP; IF TG_OP = 'DELETE' THEN RETURN OLD; END IF; RETURN NEW;",
                    hash="98a9a60798e794a63e8f0fffaaddaacf94fdaaf3",
                    operation="UPDATE OR DELETE",
                    pgid="pgtrigger_cited_keys_are_kept_63d18",
                    table="registered_receivers",
                    when="BEFORE",
                ),
            ),
        ),
        migrations.RunSQL(ERASE, UNERASE),
    ]
