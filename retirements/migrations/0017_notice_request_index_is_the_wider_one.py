"""Foreign keys whose own index a wider index or unique constraint already leads: the automatic
index is dropped (each insert and move wrote it for no read the wider one does not serve). The
database side drops only the index: Django's own AlterField would drop the foreign key and add it
back, checking every row again."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('retirements', '0016_due_batch_order'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='noticeslot',
                    name='request',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='notices', to='retirements.retirementrequest'),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "retirements_noticeslot_request_id_194b7bd2"', reverse_sql='CREATE INDEX "retirements_noticeslot_request_id_194b7bd2" ON "retirements_noticeslot" ("request_id")'
                ),
            ],
        ),
    ]
