"""Retention: records holds, tombstones and the runs of the retention job."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('ops', '0010_notifications_schedule'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='RetentionRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('started_at', models.DateTimeField()),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('dry_run', models.BooleanField(default=False)),
                ('periods', models.JSONField(default=dict)),
                ('counts', models.JSONField(default=dict)),
                ('stopped_early', models.BooleanField(default=False, help_text="its time budget ran out; the rest is next run's")),
            ],
            options={
                'db_table': 'ops_retention_runs',
            },
        ),
        migrations.CreateModel(
            name='RecordsHold',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('case_kind', models.CharField(max_length=16)),
                ('case_id', models.UUIDField()),
                ('reason', models.TextField()),
                ('placed_at', models.DateTimeField()),
                ('released_at', models.DateTimeField(blank=True, null=True)),
                ('release_reason', models.TextField(blank=True, default='')),
                ('placed_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('released_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'db_table': 'ops_records_holds',
                'permissions': [('place_recordshold', 'Can place or release a records hold')],
                'constraints': [models.UniqueConstraint(condition=models.Q(('released_at__isnull', True)), fields=('case_kind', 'case_id'), name='one_open_records_hold')],
            },
        ),
        migrations.CreateModel(
            name='Tombstone',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('case_kind', models.CharField(max_length=16)),
                ('case_id', models.UUIDField()),
                ('opened_at', models.DateTimeField()),
                ('closed_at', models.DateTimeField()),
                ('outcome', models.CharField(max_length=32)),
                ('approver_ids', models.JSONField(default=list)),
                ('operation_ids', models.JSONField(default=list)),
                ('proof_digest', models.CharField(max_length=80)),
                ('made_at', models.DateTimeField()),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='tombstones', to='ops.retentionrun')),
            ],
            options={
                'db_table': 'ops_tombstones',
                'constraints': [models.UniqueConstraint(fields=('case_kind', 'case_id'), name='one_tombstone_per_case')],
            },
        ),
    ]
