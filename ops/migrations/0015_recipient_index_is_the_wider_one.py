"""The foreign key's own index, led by one_notification_per_occurrence, is dropped (see deletions 0021)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('ops', '0014_tallies'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='notification',
                    name='recipient',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "ops_notifications_recipient_id_7a35c861"', reverse_sql='CREATE INDEX "ops_notifications_recipient_id_7a35c861" ON "ops_notifications" ("recipient_id")'
                ),
            ],
        ),
    ]
