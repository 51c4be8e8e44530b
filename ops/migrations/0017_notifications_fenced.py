"""Notifications fenced by their claim (issue 51 item 5): each claim of a notification takes the
next generation (`claim_generation`), and the database refuses a claim that does not, or a
generation moved by anything but a claim. The sender re-checks holder and generation just before
its send, and saves its outcome only under both."""

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("ops", "0016_records_guard_themselves")]

    operations = [
        migrations.AddField(
            model_name="notification",
            name="claim_generation",
            field=models.IntegerField(default=0),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="notification",
            trigger=pgtrigger.compiler.Trigger(
                name="claims_take_the_next_generation",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    condition='WHEN (OLD."claim_generation" IS DISTINCT FROM (NEW."claim_generation") OR OLD."claimed_by" IS DISTINCT FROM (NEW."claimed_by") OR OLD."status" IS DISTINCT FROM (NEW."status"))',
                    func="IF ((NEW.status = 'sending' AND (OLD.status <> 'sending' OR NEW.claimed_by IS DISTINCT FROM OLD.claimed_by)) OR NEW.claim_generation IS DISTINCT FROM OLD.claim_generation) AND NOT (NEW.status = 'sending' AND NEW.claim_generation = OLD.claim_generation + 1) THEN RAISE EXCEPTION '%: a claim takes the next generation (% to %), and only a claim moves it', TG_TABLE_NAME, OLD.claim_generation, NEW.claim_generation USING ERRCODE = '23514'; END IF; RETURN NEW;",
                    hash="a1a5fbff01e1d858db152ba43182a22eb2fd639c",
                    operation="UPDATE",
                    pgid="pgtrigger_claims_take_the_next_generation_9fe13",
                    table="ops_notifications",
                    when="BEFORE",
                ),
            ),
        ),
    ]
