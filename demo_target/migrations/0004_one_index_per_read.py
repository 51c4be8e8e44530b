"""The posts' and agents' second index on their membership goes (the foreign key's own serves
the same reads), and the memberships' index on person, led by target_membership_once (see
deletions 0021: only the index is dropped, the foreign key stays)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('demo_target', '0003_target_apply'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='agent',
            name='target_agents_membership',
        ),
        migrations.RemoveIndex(
            model_name='post',
            name='target_posts_membership',
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='membership',
                    name='person',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='memberships', to='demo_target.person'),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "target_memberships_person_id_9091c99a"',
                    reverse_sql='CREATE INDEX "target_memberships_person_id_9091c99a" ON "target_memberships" ("person_id")',
                ),
            ],
        ),
    ]
