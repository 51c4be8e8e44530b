"""Notice slot, watcher and purge-job status become protected FSM fields (no schema change)."""

import django_fsm
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("retirements", "0003_staff_groups"),
    ]

    operations = [
        migrations.AlterField(
            model_name="noticeslot",
            name="status",
            field=django_fsm.FSMField(
                choices=[
                    ("pending", "Pending"),
                    ("delivered", "Delivered"),
                    ("suppressed", "Suppressed"),
                    ("failed", "Failed"),
                ],
                default="pending",
                max_length=16,
                protected=True,
            ),
        ),
        migrations.AlterField(
            model_name="purgejob",
            name="status",
            field=django_fsm.FSMField(
                choices=[("queued", "Queued"), ("done", "Done")], default="queued", max_length=16, protected=True
            ),
        ),
        migrations.AlterField(
            model_name="retirementwatcher",
            name="status",
            field=django_fsm.FSMField(
                choices=[
                    ("pending", "Pending"),
                    ("running", "Running"),
                    ("settled", "Settled"),
                    ("superseded", "Superseded"),
                ],
                default="pending",
                max_length=16,
                protected=True,
            ),
        ),
    ]
