"""Notices fenced by their claim (issue 51 item 5)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("retirements", "0019_records_guard_themselves")]

    operations = []  # type: ignore[var-annotated]
