"""The receiver's signed calls: each nonce taken once (receiver.signing)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('demo_target', '0004_one_index_per_read'),
    ]

    operations = [
        migrations.CreateModel(
            name='CallNonce',
            fields=[
                ('nonce', models.CharField(max_length=64, primary_key=True, serialize=False)),
                ('kept_until', models.DateTimeField(db_index=True)),
            ],
            options={
                'db_table': 'receiver_call_nonces',
            },
        ),
    ]
