"""Custody: a backup beside the owner of every open retirement case."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('retirements', '0009_transitions_after_a_refused_purge'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='retirementrequest',
            options={'permissions': [('request_retirement', 'Can request a workspace retirement'), ('hold_retirementrequest', 'Can hold or release a retirement'), ('cancel_retirementrequest', 'Can cancel a retirement'), ('resume_retirementrequest', 'Can resume a retirement watcher'), ('retry_notices_retirementrequest', 'Can re-arm failed retirement notices'), ('assign_retirementrequest', 'Can assign a retirement case to someone')]},
        ),
        migrations.AddField(
            model_name='retirementrequest',
            name='backup',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddIndex(
            model_name='retirementrequest',
            index=models.Index(condition=models.Q(('status__in', ['waiting', 'held', 'executing'])), fields=['owner'], name='retirement_open_owner'),
        ),
        migrations.AddIndex(
            model_name='retirementrequest',
            index=models.Index(condition=models.Q(('status__in', ['waiting', 'held', 'executing'])), fields=['backup'], name='retirement_open_backup'),
        ),
    ]
