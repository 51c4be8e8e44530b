"""The foreign keys' own indexes, led by api_idempotency_once_per_user and
api_rate_window_once, are dropped (see deletions 0021)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('api', '0003_webhook_schedule'),
        ('core', '0002_tokens_user_index_is_the_wider_one'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='idempotencykey',
                    name='user',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL),
                ),
                migrations.AlterField(
                    model_name='ratewindow',
                    name='token',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='core.apitoken'),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "api_idempotency_keys_user_id_93f57b63"', reverse_sql='CREATE INDEX "api_idempotency_keys_user_id_93f57b63" ON "api_idempotency_keys" ("user_id")'
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "api_rate_windows_token_id_8a091071"', reverse_sql='CREATE INDEX "api_rate_windows_token_id_8a091071" ON "api_rate_windows" ("token_id")'
                ),
            ],
        ),
    ]
