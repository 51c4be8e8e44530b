"""The cluster heartbeat gets its own schedule (it used to ride on the deletion dispatcher)."""

from django.db import migrations

NAME = "ops: cluster heartbeat"


def register(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=NAME, defaults={"func": "ops.tasks.beat", "schedule_type": "I", "minutes": 1, "repeats": -1}
    )


def unregister(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("ops", "0001_initial"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(register, unregister)]
