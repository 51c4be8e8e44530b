#!/usr/bin/env python
import os
import sys

# What serves or works: each refuses to start against a schema newer than this code (core.rollout).
STARTS = {"runserver", "run_workers", "qcluster", "run_deletion", "run_watchers"}


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        if len(sys.argv) > 1 and sys.argv[1] in STARTS:
            import django

            from core import rollout

            django.setup()
            try:
                rollout.require_known_schema()
            except rollout.NewerSchema as refused:
                print(refused, file=sys.stderr)
                sys.exit(3)
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as refused:  # a setting refused: one line, not a traceback
        sys.exit(f"configuration refused: {' '.join(str(refused).split())}")


if __name__ == "__main__":
    main()
