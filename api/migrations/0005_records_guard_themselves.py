"""The records guard themselves (issue 51 item 4): a webhook delivery once delivered or given up is
the record of what a subscriber was told: never rewritten, and never deleted but by the retention
job (its pass, core 0004); a waiting one is still the outbox's own row."""

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("api", "0004_foreign_key_indexes_led_by_wider_ones"),
        ("core", "0004_records_guard_themselves"),
    ]

    operations = [
        pgtrigger.migrations.AddTrigger(
            model_name='webhookdelivery',
            trigger=pgtrigger.compiler.Trigger(name='final_delivery_is_evidence', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF TG_OP = 'DELETE' AND (EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) OR NOT (OLD.status IN ('delivered', 'failed'))) THEN RETURN OLD; END IF; IF TG_OP = 'DELETE' THEN RAISE EXCEPTION '%: a delivered or failed webhook delivery is evidence: never deleted (but by the retention job)', TG_TABLE_NAME USING ERRCODE = '23514'; END IF; IF NOT (OLD.status IN ('delivered', 'failed')) OR (false) OR (EXISTS (SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()) AND (false)) THEN RETURN NEW; END IF; RAISE EXCEPTION '%: a delivered or failed webhook delivery is evidence once final: never rewritten', TG_TABLE_NAME USING ERRCODE = '23514';", hash='06735cf60d40afaaee19dfb834a520a3a002ecad', operation='UPDATE OR DELETE', pgid='pgtrigger_final_delivery_is_evidence_f3bd7', table='api_webhook_deliveries', when='BEFORE')),
        ),
    ]
