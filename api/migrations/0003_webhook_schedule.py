"""Due webhook deliveries are sent every minute, on the control cluster, by the schedule
"api: send webhooks" (`api.tasks.send_webhooks`)."""

from django.db import migrations

NAME = "api: send webhooks"


def forwards(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=NAME,
        defaults={"func": "api.tasks.send_webhooks", "schedule_type": "I", "minutes": 1, "repeats": -1,
                  "cluster": "control"},
    )


def backwards(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [("api", "0002_webhook_outbox"), ("django_q", "0018_task_success_index")]
    operations = [migrations.RunPython(forwards, backwards)]
