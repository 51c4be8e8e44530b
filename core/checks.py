"""System checks: settings the product's own rules depend on.

The receiving boundaries read a person's permission in SQL (`core.authority.may_sql`), the same
rule as Django's ModelBackend. A backend that grants permissions some other way (SSO groups, a
directory) would make the two disagree, and the boundary would allow what Django denies or the
reverse; so every command and the server refuse to start with one."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register

MIRRORED = "django.contrib.auth.backends.ModelBackend"
# Backends that authenticate (or refuse) but grant no permission of their own.
GRANT_NOTHING = {"axes.backends.AxesStandaloneBackend"}
SAME_AS_MIRRORED = {MIRRORED, "axes.backends.AxesBackend"}  # AxesBackend is ModelBackend with lockouts


@register()
def permission_backends(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    backends = list(settings.AUTHENTICATION_BACKENDS)
    errors = []
    if not SAME_AS_MIRRORED & set(backends):
        errors.append(
            Error(
                "AUTHENTICATION_BACKENDS has no django.contrib.auth.backends.ModelBackend: the permission check "
                "where effects land (core.authority.may_sql) mirrors it, and would disagree with Django",
                id="core.E001",
            )
        )
    for backend in backends:
        if backend not in GRANT_NOTHING | SAME_AS_MIRRORED:
            errors.append(
                Error(
                    f"AUTHENTICATION_BACKENDS names {backend}, which may grant permissions that the check where "
                    "effects land (core.authority.may_sql, ModelBackend's rule in SQL) does not see",
                    hint="grant permissions through Django groups (an SSO backend may authenticate, and sync groups)",
                    id="core.E002",
                )
            )
    return errors
