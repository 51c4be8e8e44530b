"""The foreign key's own index, led by core_tokens_by_user, is dropped (see deletions 0021)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('core', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='apitoken',
                    name='user',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "core_api_tokens_user_id_255b106b"', reverse_sql='CREATE INDEX "core_api_tokens_user_id_255b106b" ON "core_api_tokens" ("user_id")'
                ),
            ],
        ),
    ]
