"""The one clock: timezone-aware, movable in tests with time-machine."""

from datetime import datetime

from django.utils import timezone


def now() -> datetime:
    return timezone.now()
