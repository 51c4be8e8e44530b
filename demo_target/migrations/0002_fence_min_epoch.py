from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("demo_target", "0001_initial")]

    operations = [
        migrations.AddField(model_name="fence", name="min_epoch", field=models.BigIntegerField(default=0)),
        migrations.AddField(
            model_name="fence", name="epoch_raised_at", field=models.DateTimeField(blank=True, null=True)
        ),
    ]
