"""Custody the database holds (issue 51 item 6)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("retirements", "0020_notices_fenced")]

    operations = []  # type: ignore[var-annotated]
