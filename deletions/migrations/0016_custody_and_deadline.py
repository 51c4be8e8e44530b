"""Custody and the legal deadline: a person and backup per open case, received and due times.

Requests saved before this were received when submitted and are due one month later."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deletions', '0015_search_indexes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='deletionrequest',
            options={'permissions': [('submit_deletionrequest', 'Can submit a deletion request'), ('approve_deletionrequest', 'Can approve a deletion request'), ('cancel_deletionrequest', 'Can cancel a deletion request'), ('run_deletionrequest', 'Can run or resume a deletion request'), ('assign_deletionrequest', 'Can assign a deletion case to someone'), ('extend_deadline_deletionrequest', "Can extend a deletion request's deadline")]},
        ),
        migrations.AddField(
            model_name='deletionrequest',
            name='assigned_for',
            field=models.CharField(blank=True, default='', max_length=80),
        ),
        migrations.AddField(
            model_name='deletionrequest',
            name='assignee',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='deletionrequest',
            name='backup',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='deletionrequest',
            name='due_at',
            field=models.DateTimeField(null=True),
        ),
        migrations.AddField(
            model_name='deletionrequest',
            name='received_at',
            field=models.DateTimeField(null=True),
        ),
        migrations.AddIndex(
            model_name='deletionrequest',
            index=models.Index(condition=models.Q(('status__in', ['submitted', 'approved', 'running', 'retry_wait', 'needs_attention', 'needs_review'])), fields=['assignee'], name='deletion_open_assignee'),
        ),
        migrations.AddIndex(
            model_name='deletionrequest',
            index=models.Index(condition=models.Q(('status__in', ['submitted', 'approved', 'running', 'retry_wait', 'needs_attention', 'needs_review'])), fields=['backup'], name='deletion_open_backup'),
        ),
        migrations.AddIndex(
            model_name='deletionrequest',
            index=models.Index(fields=['due_at', 'id'], name='deletion_due'),
        ),
        migrations.RunSQL(
            "UPDATE entity_deletion_requests SET received_at = created_at, due_at = created_at + interval '1 month'",
            migrations.RunSQL.noop,
        ),
        migrations.AlterField(model_name='deletionrequest', name='received_at', field=models.DateTimeField()),
        migrations.AlterField(model_name='deletionrequest', name='due_at', field=models.DateTimeField()),
    ]
