"""Old django-q2 task results are pruned hourly (the cluster no longer prunes per task)."""

from django.db import migrations

NAME = "ops: prune old task results"


def register(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=NAME, defaults={"func": "ops.tasks.prune_results", "schedule_type": "I", "minutes": 60, "repeats": -1}
    )


def unregister(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("ops", "0003_people_and_permissions"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        migrations.RunPython(register, unregister),
        # django-q2's task table has no index on stopped: the pruning (and its admin's default order) need one.
        migrations.RunSQL(
            "CREATE INDEX IF NOT EXISTS ops_q_task_stopped ON django_q_task (stopped)",
            "DROP INDEX IF EXISTS ops_q_task_stopped",
        ),
    ]
