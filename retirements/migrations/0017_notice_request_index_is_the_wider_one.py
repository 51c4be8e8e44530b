"""The foreign key's own index, led by one_notice_slot_per_kind_and_time, is dropped (see deletions 0021)."""

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
