#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as refused:  # a setting refused: one line, not a traceback
        sys.exit(f"configuration refused: {' '.join(str(refused).split())}")


if __name__ == "__main__":
    main()
