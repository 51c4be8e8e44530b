"""The records guard themselves (issue 51 items 3-4)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("retirements", "0018_backup_is_another_person")]

    operations = []  # type: ignore[var-annotated]
