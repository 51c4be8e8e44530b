"""Foreign keys whose own index a wider index or unique constraint already leads: the automatic
index is dropped (each insert and move wrote it for no read the wider one does not serve). The
database side drops only the index: Django's own AlterField would drop the foreign key and add it
back, checking every row again."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deletions', '0020_failed_attempts_index'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='authoritywithdrawal',
                    name='request',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='withdrawals', to='deletions.deletionrequest'),
                ),
                migrations.AlterField(
                    model_name='leaseevent',
                    name='request',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='lease_events', to='deletions.deletionrequest'),
                ),
                migrations.AlterField(
                    model_name='stageattempt',
                    name='stage',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='attempt_rows', to='deletions.stagehistory'),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "entity_deletion_authority_withdrawals_request_id_7b36b082"', reverse_sql='CREATE INDEX "entity_deletion_authority_withdrawals_request_id_7b36b082" ON "entity_deletion_authority_withdrawals" ("request_id")'
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "entity_deletion_lease_events_request_id_1706f8e5"', reverse_sql='CREATE INDEX "entity_deletion_lease_events_request_id_1706f8e5" ON "entity_deletion_lease_events" ("request_id")'
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "entity_deletion_stage_attempts_stage_id_964a48e6"', reverse_sql='CREATE INDEX "entity_deletion_stage_attempts_stage_id_964a48e6" ON "entity_deletion_stage_attempts" ("stage_id")'
                ),
            ],
        ),
    ]
