"""Register the periodic django-q2 schedule that runs due watcher steps (idempotent)."""

from django.db import migrations

NAME = "retirements: run due watcher steps"


def register(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=NAME,
        defaults={"func": "retirements.tasks.run_due", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def unregister(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("retirements", "0001_initial"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(register, unregister)]
