"""The records guard themselves (issue 51 items 3-4)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("core", "0003_application_role")]

    operations = []  # type: ignore[var-annotated]
