"""The records guard themselves (issue 51 items 3-4).

The decision log's DELETE passes only under the retention functions' pass (core 0004, ops 0016),
never a setting; a workspace, a request, its watchers and purge job are deleted only by retention
(which keeps workspaces); a notice once delivered or suppressed is never rewritten; an alarm is
resolved once, never rewritten. `retirements_erase_case` is the deletion of a closed case that the
retention function runs (the application may not call it itself).
"""

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations

ERASE = """
CREATE FUNCTION retirements_erase_case(one_case uuid) RETURNS jsonb LANGUAGE sql
SET search_path = pg_catalog, public, pg_temp AS $$
WITH req AS (
    SELECT id FROM retirements_retirementrequest
    WHERE id = one_case AND status IN ('completed', 'cancelled', 'closed')
), alarms AS (
    DELETE FROM retirements_alarm a USING req WHERE a.request_id = req.id RETURNING a.id
), decisions AS (
    DELETE FROM retirements_decision d USING req WHERE d.request_id = req.id RETURNING d.id
), notices AS (
    DELETE FROM retirements_noticeslot n USING req WHERE n.request_id = req.id RETURNING n.id
), jobs AS (
    DELETE FROM retirements_purgejob j USING req WHERE j.request_id = req.id RETURNING j.id
), watchers AS (
    DELETE FROM retirements_retirementwatcher w USING req WHERE w.request_id = req.id RETURNING w.id
), request AS (
    DELETE FROM retirements_retirementrequest r USING req WHERE r.id = req.id RETURNING r.id
)
SELECT jsonb_build_object(
    'requests', (SELECT count(*) FROM request), 'notices', (SELECT count(*) FROM notices),
    'decisions', (SELECT count(*) FROM decisions),
    'other', (SELECT count(*) FROM watchers) + (SELECT count(*) FROM jobs) + (SELECT count(*) FROM alarms)
)
$$;

-- Run only by the retention function (ops 0016), as its owner: never by the application.
REVOKE ALL ON FUNCTION retirements_erase_case(uuid) FROM PUBLIC;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("retirements", "0018_backup_is_another_person"),
        ("core", "0004_records_guard_themselves"),
    ]

    operations = [
        pgtrigger.migrations.RemoveTrigger(
            model_name='decision',
            name='append_only',
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='decision',
            trigger=pgtrigger.compiler.Trigger(name='append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; RAISE EXCEPTION '%: evidence rows are never rewritten or deleted', TG_TABLE_NAME USING ERRCODE = '23514';", hash='96344b2000c0beca7164f4f67a508087b08dad73', operation='UPDATE OR DELETE', pgid='pgtrigger_append_only_cf95d', table='retirements_decision', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='workspace',
            trigger=pgtrigger.compiler.Trigger(name='deleted_only_by_retention', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; RAISE EXCEPTION '%: a case''s rows are deleted only by the retention job', TG_TABLE_NAME USING ERRCODE = '23514';", hash='e11096f3b455633eb5ec6f2f76325b0fa6fc0b12', operation='DELETE', pgid='pgtrigger_deleted_only_by_retention_dd7f6', table='retirements_workspace', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='retirementrequest',
            trigger=pgtrigger.compiler.Trigger(name='deleted_only_by_retention', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; RAISE EXCEPTION '%: a case''s rows are deleted only by the retention job', TG_TABLE_NAME USING ERRCODE = '23514';", hash='b84aa2ce93378fb515b046792a644f438f2790f0', operation='DELETE', pgid='pgtrigger_deleted_only_by_retention_0c0b5', table='retirements_retirementrequest', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='retirementwatcher',
            trigger=pgtrigger.compiler.Trigger(name='deleted_only_by_retention', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; RAISE EXCEPTION '%: a case''s rows are deleted only by the retention job', TG_TABLE_NAME USING ERRCODE = '23514';", hash='e1708fe050705a645b07c68efca77e15a6bdd4bb', operation='DELETE', pgid='pgtrigger_deleted_only_by_retention_a6664', table='retirements_retirementwatcher', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='purgejob',
            trigger=pgtrigger.compiler.Trigger(name='deleted_only_by_retention', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; RAISE EXCEPTION '%: a case''s rows are deleted only by the retention job', TG_TABLE_NAME USING ERRCODE = '23514';", hash='131969063ab2819e6816234349b9f06a5a8f87fd', operation='DELETE', pgid='pgtrigger_deleted_only_by_retention_1ba97', table='retirements_purgejob', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='noticeslot',
            trigger=pgtrigger.compiler.Trigger(name='settled_notice_is_evidence', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; IF TG_OP = 'DELETE' THEN RAISE EXCEPTION '%: a delivered or suppressed notice is evidence: never deleted (but by the retention job)', TG_TABLE_NAME USING ERRCODE = '23514'; END IF; IF NOT (OLD.status IN ('delivered', 'suppressed')) OR (false) OR (EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) AND (false)) THEN RETURN NEW; END IF; RAISE EXCEPTION '%: a delivered or suppressed notice is evidence once final: never rewritten', TG_TABLE_NAME USING ERRCODE = '23514';", hash='f69989831d92f23901edcc04e80ad8c19a2fa723', operation='UPDATE OR DELETE', pgid='pgtrigger_settled_notice_is_evidence_13dd5', table='retirements_noticeslot', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='alarm',
            trigger=pgtrigger.compiler.Trigger(name='resolved_once', sql=pgtrigger.compiler.UpsertTriggerSql(func='IF TG_OP = \'DELETE\' AND EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) THEN RETURN OLD; END IF; IF TG_OP = \'DELETE\' THEN RAISE EXCEPTION \'%: an alarm is never deleted (but by the retention job)\', TG_TABLE_NAME USING ERRCODE = \'23514\'; END IF; IF OLD."resolved_at" IS NULL AND NEW."resolved_at" IS NOT NULL AND (to_jsonb(NEW) - ARRAY(SELECT k FROM jsonb_object_keys(to_jsonb(OLD)) AS k WHERE starts_with(k, \'resolved\') OR starts_with(k, \'decision\'))) = (to_jsonb(OLD) - ARRAY(SELECT k FROM jsonb_object_keys(to_jsonb(OLD)) AS k WHERE starts_with(k, \'resolved\') OR starts_with(k, \'decision\'))) THEN RETURN NEW; END IF; RAISE EXCEPTION \'%: an alarm is never rewritten; only resolved_at may be set, once (with its resolved*/decision* columns)\', TG_TABLE_NAME USING ERRCODE = \'23514\';', hash='d6b07d1efc3ceff1e7a4f0f0ede56e51b06f12e5', operation='UPDATE OR DELETE', pgid='pgtrigger_resolved_once_ab864', table='retirements_alarm', when='BEFORE')),
        ),
        migrations.RunSQL(ERASE, "DROP FUNCTION IF EXISTS retirements_erase_case(uuid);"),
    ]
