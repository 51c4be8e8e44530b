"""Operators gain submit (deletions) and retry notices (retirements); the seed's text actor
columns are linked to their users where a user of that name exists."""

from django.conf import settings
from django.contrib.auth.management import create_permissions
from django.db import migrations

# Frozen copy of the groups as they are when this migration lands (migrations import no project code).
GROUPS: dict[str, list[tuple[str, str]]] = {
    "operators": [
        ("deletions", "view_deletionrequest"),
        ("deletions", "submit_deletionrequest"),
        ("deletions", "cancel_deletionrequest"),
        ("deletions", "run_deletionrequest"),
        ("retirements", "view_workspace"),
        ("retirements", "view_retirementrequest"),
        ("retirements", "request_retirement"),
        ("retirements", "hold_retirementrequest"),
        ("retirements", "cancel_retirementrequest"),
        ("retirements", "resume_retirementrequest"),
        ("retirements", "retry_notices_retirementrequest"),
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


def forwards(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, perms in GROUPS.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set(
            [Permission.objects.get(content_type__app_label=app, codename=codename) for app, codename in perms]
        )
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    users = dict(User.objects.values_list("username", "id"))
    Request = apps.get_model("deletions", "DeletionRequest")
    for username, user_id in users.items():
        Request.objects.filter(requested_by=username, requested_by_user__isnull=True).update(
            requested_by_user_id=user_id
        )
    Approval = apps.get_model("deletions", "DeletionApproval")
    for username, user_id in users.items():
        Approval.objects.filter(approved_by=username, approved_by_user__isnull=True).update(approved_by_user_id=user_id)


class Migration(migrations.Migration):
    dependencies = [
        ("ops", "0002_cluster_heartbeat_schedule"),
        ("deletions", "0007_people_exact_approvals_append_only_log"),
        ("retirements", "0005_purge_lease_notice_claims_append_only_log"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
