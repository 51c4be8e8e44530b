"""Target systems are registered data: a receiver reached over HTTP, by prefix (deletions.targets)."""

import django.core.validators
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deletions', '0023_completed_history_attempts_and_lease_events_are_evidence'),
    ]

    operations = [
        migrations.CreateModel(
            name='TargetSystem',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100, unique=True)),
                ('prefix', models.CharField(max_length=40, unique=True, validators=[django.core.validators.RegexValidator('^[a-z][a-z0-9_-]{0,38}:$', 'a prefix is lower-case letters, digits, _ or -, then :')])),
                ('base_url', models.URLField(max_length=300, validators=[django.core.validators.RegexValidator('/receiver/v1/$', "the receiver's URL ends with /receiver/v1/")])),
                ('keys', models.JSONField()),
                ('connect_timeout_seconds', models.FloatField(default=2.0, validators=[django.core.validators.MinValueValidator(0.1), django.core.validators.MaxValueValidator(60)])),
                ('read_timeout_seconds', models.FloatField(default=30.0, validators=[django.core.validators.MinValueValidator(0.1), django.core.validators.MaxValueValidator(600)])),
                ('registered_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'db_table': 'registered_receivers',
                'ordering': ['prefix'],
            },
        ),
    ]
