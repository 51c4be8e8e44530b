"""Register the periodic schedules (dispatcher and retirement watchers); idempotent."""

from django.db import migrations

from core.schedules import ensure_schedules


def register(apps, schema_editor):
    ensure_schedules(apps.get_model("django_q", "Schedule"))


class Migration(migrations.Migration):
    dependencies = [
        ("deletions", "0003_lease_events_and_cluster_heartbeats"),
        ("retirements", "0002_run_due_schedule"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(register, migrations.RunPython.noop)]
