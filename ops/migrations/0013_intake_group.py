"""Service accounts of intake systems (a privacy portal, a ticketing system) are users in the
`intake` group: they may submit deletions, request retirements and read both, nothing more."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

# Frozen copy (migrations import no project code).
INTAKE = [
    ("deletions", "deletionrequest", "view_deletionrequest"),
    ("deletions", "deletionrequest", "submit_deletionrequest"),
    ("retirements", "retirementrequest", "view_retirementrequest"),
    ("retirements", "retirementrequest", "request_retirement"),
]


def forwards(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Permission = apps.get_model("auth", "Permission")
    group, _ = apps.get_model("auth", "Group").objects.get_or_create(name="intake")
    group.permissions.add(
        *[
            Permission.objects.get(content_type__app_label=app, content_type__model=model, codename=codename)
            for app, model, codename in INTAKE
        ]
    )


def backwards(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name="intake").delete()


class Migration(migrations.Migration):
    dependencies = [("ops", "0012_retention_schedule_and_holds"), ("retirements", "0011_evidence_deleted_only_by_retention")]
    operations = [migrations.RunPython(forwards, backwards)]
