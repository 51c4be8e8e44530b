"""The records guard themselves (issue 51 items 3-4)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("deletions", "0026_receiver_unanswered_since")]

    operations = []  # type: ignore[var-annotated]
