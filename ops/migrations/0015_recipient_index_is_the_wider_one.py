"""Foreign keys whose own index a wider index or unique constraint already leads: the automatic
index is dropped (each insert and move wrote it for no read the wider one does not serve). The
database side drops only the index: Django's own AlterField would drop the foreign key and add it
back, checking every row again."""

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
