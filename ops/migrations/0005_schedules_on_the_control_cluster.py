"""The product's schedules move to the control cluster, apart from the stage workers."""

from django.db import migrations

NAMES = [
    "deletions: dispatch due runs",
    "retirements: run due watcher steps",
    "ops: cluster heartbeat",
    "ops: prune old task results",
]


def to_control(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name__in=NAMES).update(cluster="control")


def to_default(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name__in=NAMES).update(cluster=None)


class Migration(migrations.Migration):
    dependencies = [("ops", "0004_prune_results_schedule")]

    operations = [migrations.RunPython(to_control, to_default)]
