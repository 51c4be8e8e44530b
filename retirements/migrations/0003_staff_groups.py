"""Create the operators, approvers and support (read-only) groups."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

from core.groups import ensure_groups


def forwards(apps, schema_editor):
    # Permissions are normally created after migrate; make sure they exist now.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    ensure_groups(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


def backwards(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(
        name__in=["operators", "approvers", "support (read-only)"]
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("retirements", "0002_run_due_schedule"),
        ("deletions", "0002_decision_log"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
