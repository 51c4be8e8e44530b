"""The records guard themselves (issue 51 items 3-4)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("ops", "0015_recipient_index_is_the_wider_one")]

    operations = []  # type: ignore[var-annotated]
