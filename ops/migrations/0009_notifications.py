"""Notifications: one row per person and occurrence, claimed before it is sent; preferences."""

import django.db.models.deletion
import django_fsm
import pgtrigger.compiler
import pgtrigger.migrations
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('ops', '0008_custody_permissions_and_auditors'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='NotificationPreference',
            fields=[
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, serialize=False, to=settings.AUTH_USER_MODEL)),
                ('delivery', models.CharField(choices=[('immediate', 'each message as it happens'), ('digest', 'one digest a day'), ('off', 'off (deadlines still come)')], default='immediate', max_length=16)),
            ],
            options={
                'db_table': 'ops_notification_preferences',
            },
        ),
        migrations.CreateModel(
            name='Notification',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(help_text='the occurrence: event, case and what makes it new', max_length=200)),
                ('event', models.CharField(max_length=32)),
                ('case_kind', models.CharField(max_length=16)),
                ('case_id', models.UUIDField()),
                ('subject', models.CharField(max_length=200)),
                ('body', models.TextField()),
                ('status', django_fsm.FSMField(choices=[('pending', 'waiting to be sent'), ('sending', 'being sent'), ('sent', 'sent'), ('digest', 'kept for the daily digest'), ('digested', 'sent in a digest'), ('failed', 'failed every attempt')], default='pending', max_length=16, protected=True)),
                ('created_at', models.DateTimeField()),
                ('next_attempt_at', models.DateTimeField(blank=True, null=True)),
                ('attempts', models.IntegerField(default=0)),
                ('claimed_by', models.CharField(blank=True, default='', max_length=200)),
                ('claim_expires_at', models.DateTimeField(blank=True, null=True)),
                ('sent_at', models.DateTimeField(blank=True, null=True)),
                ('last_error', models.TextField(blank=True, default='')),
                ('recipient', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'db_table': 'ops_notifications',
                'indexes': [models.Index(fields=['status', 'next_attempt_at'], name='notification_due'), models.Index(fields=['case_kind', 'case_id'], name='notification_case')],
                'constraints': [models.UniqueConstraint(fields=('recipient', 'key'), name='one_notification_per_occurrence')],
            },
            bases=(django_fsm.FSMModelMixin, models.Model),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='notification',
            trigger=pgtrigger.compiler.Trigger(name='status_moves_as_declared', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" IS DISTINCT FROM (NEW."status"))', func='IF NOT (OLD."status" || \'>\' || NEW."status") = ANY (ARRAY[\'digest>digested\', \'pending>sending\', \'sending>failed\', \'sending>pending\', \'sending>sent\']::text[]) THEN RAISE EXCEPTION \'lifecycle: %.status may not move from % to % (no such transition is declared)\', TG_TABLE_NAME, OLD."status", NEW."status" USING ERRCODE = \'23514\'; END IF; RETURN NEW;', hash='c4a928826d52bfe8abcf0aecceca61cf208cdb63', operation='UPDATE', pgid='pgtrigger_status_moves_as_declared_919d3', table='ops_notifications', when='BEFORE')),
        ),
    ]
