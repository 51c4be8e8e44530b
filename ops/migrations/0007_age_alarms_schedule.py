"""Hourly: alarms for retirements near their watcher's lifetime or held too long (control cluster)."""

from django.db import migrations

NAME = "retirements: age alarms"


def register(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=NAME,
        defaults={
            "func": "retirements.tasks.age_alarms",
            "schedule_type": "I",
            "minutes": 60,
            "repeats": -1,
            "cluster": "control",
        },
    )


def unregister(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [("ops", "0006_approvers_may_cancel")]

    operations = [migrations.RunPython(register, unregister)]
