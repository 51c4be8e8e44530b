"""ops takes over the cluster heartbeat table that deletions 0003 created (no schema change)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("deletions", "0003_lease_events_and_cluster_heartbeats"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ClusterHeartbeat",
                    fields=[
                        ("name", models.CharField(max_length=200, primary_key=True, serialize=False)),
                        ("seen_at", models.DateTimeField()),
                    ],
                    options={"db_table": "ops_cluster_heartbeats"},
                ),
            ]
        ),
    ]
