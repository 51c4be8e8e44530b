"""Custody the database holds, one record per supervised effect (issue 51 items 2 and 6)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("deletions", "0027_records_guard_themselves")]

    operations = []  # type: ignore[var-annotated]
