"""Register the periodic schedules (dispatcher and retirement watchers); idempotent."""

from django.db import migrations

# Frozen copy of the schedules as they were when this migration landed.
SCHEDULES = {
    "deletions: dispatch due runs": "deletions.tasks.dispatch",
    "retirements: run due watcher steps": "retirements.tasks.run_due",
}


def register(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    for name, func in SCHEDULES.items():
        Schedule.objects.update_or_create(
            name=name, defaults={"func": func, "schedule_type": "I", "minutes": 1, "repeats": -1}
        )


class Migration(migrations.Migration):
    dependencies = [
        ("deletions", "0003_lease_events_and_cluster_heartbeats"),
        ("retirements", "0002_run_due_schedule"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(register, migrations.RunPython.noop)]
