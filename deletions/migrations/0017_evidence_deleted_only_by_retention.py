"""Evidence rows are still never rewritten, and deleted only by the retention job (its setting on)."""

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('deletions', '0016_custody_and_deadline'),
    ]

    operations = [
        pgtrigger.migrations.RemoveTrigger(
            model_name='deletionapproval',
            name='approval_is_evidence',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='deletiondecision',
            name='append_only',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='operatorrecord',
            name='operator_records_append_only',
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='deletionapproval',
            trigger=pgtrigger.compiler.Trigger(name='approval_is_evidence', sql=pgtrigger.compiler.UpsertTriggerSql(func='IF TG_OP = \'DELETE\' AND current_setting(\'backoffice.retention\', true) = \'on\' THEN RETURN OLD; END IF; IF TG_OP = \'DELETE\' THEN RAISE EXCEPTION \'%: evidence rows are never deleted\', TG_TABLE_NAME USING ERRCODE = \'23514\'; END IF; IF (to_jsonb(OLD) - \'revoked_at\') IS DISTINCT FROM (to_jsonb(NEW) - \'revoked_at\') OR OLD."revoked_at" IS NOT NULL OR NEW."revoked_at" IS NULL THEN RAISE EXCEPTION \'%: evidence rows are never rewritten; only revoked_at may be set, once\', TG_TABLE_NAME USING ERRCODE = \'23514\'; END IF; RETURN NEW;', hash='a6b724f06ee2ba5d3a4d17e05196b0421130eb81', operation='UPDATE OR DELETE', pgid='pgtrigger_approval_is_evidence_80e67', table='entity_deletion_approvals', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='deletiondecision',
            trigger=pgtrigger.compiler.Trigger(name='append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF TG_OP = 'DELETE' AND current_setting('backoffice.retention', true) = 'on' THEN RETURN OLD; END IF; RAISE EXCEPTION '%: evidence rows are never rewritten or deleted', TG_TABLE_NAME USING ERRCODE = '23514';", hash='5b454aba1c7f2b61b341b5062b233d67187cab6f', operation='UPDATE OR DELETE', pgid='pgtrigger_append_only_fd4d7', table='entity_deletion_decisions', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='operatorrecord',
            trigger=pgtrigger.compiler.Trigger(name='operator_records_append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF TG_OP = 'DELETE' AND current_setting('backoffice.retention', true) = 'on' THEN RETURN OLD; END IF; RAISE EXCEPTION '%: evidence rows are never rewritten or deleted', TG_TABLE_NAME USING ERRCODE = '23514';", hash='ea4cd7925eb891b9ce67695003c8de8e835b4dc9', operation='UPDATE OR DELETE', pgid='pgtrigger_operator_records_append_only_7b748', table='entity_deletion_operator_records', when='BEFORE')),
        ),
    ]
