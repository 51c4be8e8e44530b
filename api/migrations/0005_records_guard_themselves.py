"""The records guard themselves (issue 51 item 4)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("api", "0004_foreign_key_indexes_led_by_wider_ones")]

    operations = []  # type: ignore[var-annotated]
