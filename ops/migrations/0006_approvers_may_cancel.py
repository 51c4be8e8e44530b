"""Approvers may cancel a deletion: a case back in review is theirs, to approve again or cancel."""

from django.db import migrations


def _cancel_and_approvers(apps):
    Permission = apps.get_model("auth", "Permission")
    cancel = Permission.objects.filter(content_type__app_label="deletions", codename="cancel_deletionrequest").first()
    return cancel, apps.get_model("auth", "Group").objects.filter(name="approvers").first()


def forwards(apps, schema_editor):
    cancel, group = _cancel_and_approvers(apps)
    if cancel is not None and group is not None:
        group.permissions.add(cancel)


def backwards(apps, schema_editor):
    cancel, group = _cancel_and_approvers(apps)
    if cancel is not None and group is not None:
        group.permissions.remove(cancel)


class Migration(migrations.Migration):
    dependencies = [("ops", "0005_schedules_on_the_control_cluster"), ("deletions", "0014_operator_records")]

    operations = [migrations.RunPython(forwards, backwards)]
