"""Create the operators, approvers and support (read-only) groups."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

# Frozen copy of the groups as they were when this migration landed (migrations import no project code).
GROUPS = {
    "operators": [
        ("deletions", "view_deletionrequest"),
        ("deletions", "cancel_deletionrequest"),
        ("deletions", "run_deletionrequest"),
        ("retirements", "view_workspace"),
        ("retirements", "view_retirementrequest"),
        ("retirements", "request_retirement"),
        ("retirements", "hold_retirementrequest"),
        ("retirements", "cancel_retirementrequest"),
        ("retirements", "resume_retirementrequest"),
    ],
    "approvers": [
        ("deletions", "view_deletionrequest"),
        ("deletions", "approve_deletionrequest"),
        ("retirements", "view_workspace"),
        ("retirements", "view_retirementrequest"),
    ],
    "support (read-only)": [
        ("deletions", "view_deletionrequest"),
        ("retirements", "view_workspace"),
        ("retirements", "view_retirementrequest"),
    ],
}


def ensure_groups(group_model, permission_model):
    for name, perms in GROUPS.items():
        group, _ = group_model.objects.get_or_create(name=name)
        wanted = [
            permission_model.objects.get(content_type__app_label=app, codename=codename) for app, codename in perms
        ]
        group.permissions.set(wanted)


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
