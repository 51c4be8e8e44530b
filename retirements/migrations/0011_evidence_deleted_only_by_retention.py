"""Evidence rows are still never rewritten, and deleted only by the retention job (its setting on)."""

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('retirements', '0010_custody_backup'),
    ]

    operations = [
        pgtrigger.migrations.RemoveTrigger(
            model_name='decision',
            name='append_only',
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='decision',
            trigger=pgtrigger.compiler.Trigger(name='append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF TG_OP = 'DELETE' AND current_setting('backoffice.retention', true) = 'on' THEN RETURN OLD; END IF; RAISE EXCEPTION '%: evidence rows are never rewritten or deleted', TG_TABLE_NAME USING ERRCODE = '23514';", hash='afeddb9f9a64a5a8e01c39813ab141ad7871bd73', operation='UPDATE OR DELETE', pgid='pgtrigger_append_only_cf95d', table='retirements_decision', when='BEFORE')),
        ),
    ]
