"""Custody: operators and approvers may assign cases, approvers extend a deletion's deadline, and
an auditors group reads every case and its proof but decides nothing."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

# Frozen copy (migrations import no project code).
ADDED: dict[str, list[tuple[str, str]]] = {
    "operators": [("deletions", "assign_deletionrequest"), ("retirements", "assign_retirementrequest")],
    "approvers": [
        ("deletions", "assign_deletionrequest"),
        ("deletions", "extend_deadline_deletionrequest"),
        ("retirements", "assign_retirementrequest"),
    ],
    "auditors": [
        ("deletions", "view_deletionrequest"),
        ("retirements", "view_workspace"),
        ("retirements", "view_retirementrequest"),
    ],
}


def _perms(apps, pairs):
    Permission = apps.get_model("auth", "Permission")
    return [Permission.objects.get(content_type__app_label=app, codename=codename) for app, codename in pairs]


def forwards(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    for name, pairs in ADDED.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*_perms(apps, pairs))


def backwards(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Group.objects.filter(name="auditors").delete()
    for name, pairs in ADDED.items():
        group = Group.objects.filter(name=name).first()
        if group is not None:
            group.permissions.remove(*_perms(apps, pairs))


class Migration(migrations.Migration):
    dependencies = [
        ("ops", "0007_age_alarms_schedule"),
        ("deletions", "0016_custody_and_deadline"),
        ("retirements", "0010_custody_backup"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
