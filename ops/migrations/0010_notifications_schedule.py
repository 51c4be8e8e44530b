"""Each minute: name people from the rotas and send the notifications due (control cluster)."""

from django.db import migrations

NAME = "ops: send notifications"


def register(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=NAME,
        defaults={
            "func": "ops.tasks.send_notifications",
            "schedule_type": "I",
            "minutes": 1,
            "repeats": -1,
            "cluster": "control",
        },
    )


def unregister(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [("ops", "0009_notifications")]

    operations = [migrations.RunPython(register, unregister)]
