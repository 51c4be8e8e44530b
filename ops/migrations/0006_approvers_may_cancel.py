"""Approvers may cancel a deletion: a case back in review is theirs, to approve again or cancel."""

from django.db import migrations


def forwards(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    cancel = Permission.objects.filter(content_type__app_label="deletions", codename="cancel_deletionrequest").first()
    group = Group.objects.filter(name="approvers").first()
    if cancel is not None and group is not None:
        group.permissions.add(cancel)


def backwards(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    cancel = Permission.objects.filter(content_type__app_label="deletions", codename="cancel_deletionrequest").first()
    group = Group.objects.filter(name="approvers").first()
    if cancel is not None and group is not None:
        group.permissions.remove(cancel)


class Migration(migrations.Migration):
    dependencies = [("ops", "0005_schedules_on_the_control_cluster"), ("deletions", "0014_operator_records")]

    operations = [migrations.RunPython(forwards, backwards)]
