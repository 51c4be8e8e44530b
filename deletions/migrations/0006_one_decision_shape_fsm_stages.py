"""The decision log takes the shape both workflows share (actor user + label); stage
status becomes a protected FSM field; the cluster heartbeat table moves to `ops`."""

import django.db.models.deletion
import django_fsm
from django.conf import settings
from django.db import migrations, models


def link_actors(apps, schema_editor):
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    Decision = apps.get_model("deletions", "DeletionDecision")
    users = dict(User.objects.filter(username__in=Decision.objects.values("actor_label")).values_list("username", "id"))
    for username, user_id in users.items():
        Decision.objects.filter(actor_label=username, actor__isnull=True).update(actor_id=user_id)


class Migration(migrations.Migration):
    dependencies = [
        ("deletions", "0005_stage_submitted_at"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # The table stays; only Django's idea of which app owns it changes (ops 0001 takes it).
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="ClusterHeartbeat")]),
        migrations.RenameField(model_name="deletiondecision", old_name="actor", new_name="actor_label"),
        migrations.AlterField(
            model_name="deletiondecision",
            name="actor_label",
            field=models.CharField(help_text="username, or the system component", max_length=150),
        ),
        migrations.AddField(
            model_name="deletiondecision",
            name="actor",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AlterField(
            model_name="deletiondecision", name="action", field=models.CharField(max_length=64)
        ),
        migrations.AlterField(
            model_name="stagehistory",
            name="status",
            field=django_fsm.FSMField(
                choices=[("pending", "Pending"), ("running", "Running"), ("completed", "Completed"), ("failed", "Failed")],
                default="pending",
                max_length=16,
                protected=True,
            ),
        ),
        migrations.RunPython(link_actors, migrations.RunPython.noop),
    ]
