"""Notice moves say why (issue 52 item 3): a notice slot re-planned (a new due time), added by a
re-plan or suppressed keeps why (`moved_because`), written with the move by its one writer; the
database refuses a move without a reason of its own, and a reason written without a move."""

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("retirements", "0021_custody_the_database_holds"),
    ]

    operations = [
        migrations.AddField(
            model_name="noticeslot",
            name="moved_because",
            field=models.TextField(blank=True, db_default="", default=""),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="noticeslot",
            trigger=pgtrigger.compiler.Trigger(
                name="a_move_carries_its_reason",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    condition="WHEN (OLD.due_at IS DISTINCT FROM NEW.due_at OR OLD.moved_because IS DISTINCT FROM NEW.moved_because OR (NEW.status = 'suppressed' AND OLD.status IS DISTINCT FROM 'suppressed'))",
                    func="IF (OLD.due_at IS DISTINCT FROM NEW.due_at OR (NEW.status = 'suppressed' AND OLD.status <> 'suppressed')) AND NEW.moved_because <> '' AND NEW.moved_because IS DISTINCT FROM OLD.moved_because THEN RETURN NEW; END IF; IF OLD.due_at IS DISTINCT FROM NEW.due_at OR (NEW.status = 'suppressed' AND OLD.status <> 'suppressed') THEN RAISE EXCEPTION '%: a notice re-planned or suppressed says why, in the same update (moved_because, a reason of its own)', TG_TABLE_NAME USING ERRCODE = '23514'; END IF; RAISE EXCEPTION '%: moved_because is written with a move only, never afterwards', TG_TABLE_NAME USING ERRCODE = '23514';",
                    hash="5ce9a9d60b9c2dde09a296775d6872e0fc18d2f2",
                    operation="UPDATE",
                    pgid="pgtrigger_a_move_carries_its_reason_cf6f4",
                    table="retirements_noticeslot",
                    when="BEFORE",
                ),
            ),
        ),
    ]
