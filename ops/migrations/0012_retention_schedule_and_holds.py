"""Daily: the retention job (control cluster). Approvers and legal may place records holds."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

NAME = "ops: apply retention"
HOLDERS = ("approvers", "legal")


def forwards(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=NAME,
        defaults={
            "func": "ops.tasks.apply_retention",
            "schedule_type": "I",
            "minutes": 1440,
            "repeats": -1,
            "cluster": "control",
        },
    )
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    perm = apps.get_model("auth", "Permission").objects.get(
        content_type__app_label="ops", codename="place_recordshold"
    )
    for name in HOLDERS:
        group, _ = apps.get_model("auth", "Group").objects.get_or_create(name=name)
        group.permissions.add(perm)


def backwards(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [("ops", "0011_retention")]

    operations = [migrations.RunPython(forwards, backwards)]
