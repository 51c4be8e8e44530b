"""Settings for the test suite: a throw-away embedded server, or DATABASE_URL."""

import os
import tempfile

if not os.environ.get("DATABASE_URL"):
    # Created (and deleted again) only if a test connects.
    os.environ.setdefault("EMBEDDED_PGDATA", os.path.join(tempfile.gettempdir(), f"backoffice-test-pg-{os.getpid()}"))
    os.environ.setdefault("EMBEDDED_PG_CLEANUP", "delete")

from config.settings import *  # noqa: F403
from samples.demo import inprocess

# The reference receiver's WSGI application serves the demo application in this process, on the test's
# own database of it (alias `target`: the suite creates its tables and installs its dataset once,
# tests/conftest.py; tests/receiver start the receiver as a process on it). No migration runs there.
DATABASES["target"] = inprocess.database(DATABASES["default"])  # noqa: F405
DATABASE_ROUTERS = ["tests.target.Router"]
RECEIVER_IN_PROCESS = "samples.demo.inprocess.application"
RECEIVER_DATASET = str(inprocess.DATASET)
RECEIVER_PUBLIC_URL = "http://127.0.0.1:8100/receiver/v1/"  # the URL it is registered under (tests/conftest.py)
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The suite plants faults as the tables' owner would (a restore with triggers off, a row changed
# behind the back-office); the application role's refusals have their own test
# (tests/architecture/test_application_role.py), which connects as that role.
if "EMBEDDED_DATADIR" in DATABASES["default"]:  # noqa: F405
    DATABASES["default"]["USER"] = DATABASES["default"].pop("MIGRATION")["USER"]  # noqa: F405
