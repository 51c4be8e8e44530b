"""The back-office's crash and pause points (`wire.crashpoints`: test-only, inert in production),
read against its settings' `PRODUCTION`."""

from django.conf import settings

from wire import crashpoints


def crash_point(name: str) -> None:
    crashpoints.crash_point(name, production=getattr(settings, "PRODUCTION", False))
