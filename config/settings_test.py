"""Settings for the test suite: a throw-away embedded server, or DATABASE_URL."""

import os
import tempfile

if not os.environ.get("DATABASE_URL"):
    # Created (and deleted again) only if a test connects.
    os.environ.setdefault("EMBEDDED_PGDATA", os.path.join(tempfile.gettempdir(), f"backoffice-test-pg-{os.getpid()}"))
    os.environ.setdefault("EMBEDDED_PG_CLEANUP", "delete")

from config.settings import *  # noqa: F403

EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
