"""Settings for the test suite: a throw-away embedded server, or DATABASE_URL."""

import os
import tempfile

if not os.environ.get("DATABASE_URL"):
    os.environ.setdefault("EMBEDDED_PGDATA", tempfile.mkdtemp(prefix="backoffice-test-pg-"))
    os.environ.setdefault("EMBEDDED_PG_CLEANUP", "delete")

from config.settings import *  # noqa: F403

EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
