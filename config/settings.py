"""Settings, read from the environment.

Development defaults apply only when DEPLOYMENT_ENV is `development`;
production refuses to start without a secret key and runs with DEBUG off.
"""

import os
import re
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from wire import crashpoints

BASE_DIR = Path(__file__).resolve().parent.parent

DEPLOYMENT_ENV = os.environ.get("DEPLOYMENT_ENV", "development")
if DEPLOYMENT_ENV not in ("development", "production"):
    raise ImproperlyConfigured(f"DEPLOYMENT_ENV must be development or production, not {DEPLOYMENT_ENV!r}")
PRODUCTION = DEPLOYMENT_ENV == "production"

DEVELOPMENT_SECRET_KEY = "development-only-insecure-key-never-used-in-production"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DEPLOYMENT_ENV=production")
    SECRET_KEY = DEVELOPMENT_SECRET_KEY

DEBUG = not PRODUCTION and os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("ALLOWED_HOSTS", "" if PRODUCTION else "localhost,127.0.0.1").split(",")
    if h.strip()
]

# Production refuses to start unsafe: errors at start, not `check --deploy` warnings.
if PRODUCTION:
    if len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5 or SECRET_KEY == DEVELOPMENT_SECRET_KEY:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is too weak for production: use at least 50 random characters "
            "(python -c 'import secrets; print(secrets.token_urlsafe(50))')"
        )
    if not ALLOWED_HOSTS:
        raise ImproperlyConfigured("ALLOWED_HOSTS must name the site's host names when DEPLOYMENT_ENV=production")
    if any("*" in h or h.startswith(".") for h in ALLOWED_HOSTS):
        raise ImproperlyConfigured(
            "ALLOWED_HOSTS=* (or any wildcard: *, or a leading dot for every subdomain) is refused when "
            "DEPLOYMENT_ENV=production: name the site's host names"
        )
    if os.environ.get("DJANGO_DEBUG") == "1":
        raise ImproperlyConfigured("DJANGO_DEBUG=1 is refused when DEPLOYMENT_ENV=production")
    # Test machinery: a stray crash or pause point would kill or freeze workers at a stage boundary.
    for _machinery in (*crashpoints.MACHINERY, "RECEIVER_IN_PROCESS"):
        if os.environ.get(_machinery):
            raise ImproperlyConfigured(
                f"{_machinery} is test machinery and is refused when DEPLOYMENT_ENV=production; unset it"
            )

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_q",
    "pgtrigger",
    "django_htmx",
    "axes",
    "csp",
    "ninja",
    "core",
    "deletions",
    "retirements",
    "api",
    "ops",
]

MIDDLEWARE = [
    "core.logs.RequestIdMiddleware",
    "ops.probes.ProbeMiddleware",  # before the host check and the SSL redirect
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "core.admin.BadFilterMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "axes.middleware.AxesMiddleware",  # last: it turns a lockout into the lockout page
]

if PRODUCTION:  # whitenoise serves the collected static files; development's runserver serves them itself
    MIDDLEWARE.insert(
        MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
        "whitenoise.middleware.WhiteNoiseMiddleware",
    )

# Login throttling (django-axes): 5 wrong passwords for one username from one address lock
# that pair out for a cool-off period; each lockout is logged and listed in the admin.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("AXES_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = float(os.environ.get("AXES_COOLOFF_HOURS", "0.25"))  # hours
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "admin/locked_out.html"
AXES_CLIENT_STR_CALLABLE = "core.logs.pseudonymous_client"  # no username or address in log lines
# Locked per person and address, and per address alone (one client trying many names): no client
# can lock out another. The address is the client's, read through the proxies FORWARDED_ALLOW_IPS
# trusts (the same list gunicorn is given), never the proxy's own.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
AXES_CLIENT_IP_CALLABLE = "core.clients.client_address"
TRUSTED_PROXIES = [p.strip() for p in os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1").split(",") if p.strip()]

SESSION_COOKIE_AGE = int(float(os.environ.get("SESSION_HOURS", "8")) * 3600)
LOGIN_URL = "/admin/login/"
LOGIN_REDIRECT_URL = "/admin/"

# Personal tokens (core.tokens) for the API and the command line, and the API's limits.
TOKEN_DAYS = int(os.environ.get("TOKEN_DAYS", "90"))
API_RATE_PER_MINUTE = int(os.environ.get("API_RATE_PER_MINUTE", "120"))
API_MAX_BODY_BYTES = 64 * 1024
WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("WEBHOOK_TIMEOUT_SECONDS", "5"))

# The admin, htmx and the SVG pictures need nothing from elsewhere and no inline script.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],  # the admin's and our templates' style attributes
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Prometheus scrapes /metrics with "Authorization: Bearer <this>"; unset, /metrics is off (404).
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
METRICS_EXAMPLE_TOKEN = "change-me-too"  # deploy/backoffice.env.example's value, refused in production
if (
    PRODUCTION
    and METRICS_TOKEN
    and (len(METRICS_TOKEN) < 32 or len(set(METRICS_TOKEN)) < 8 or METRICS_EXAMPLE_TOKEN in METRICS_TOKEN)
):
    raise ImproperlyConfigured(
        "METRICS_TOKEN is too weak for production: use at least 32 random characters "
        "(python -c 'import secrets; print(secrets.token_urlsafe(32))'), or leave it unset to turn /metrics off"
    )

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Database: DATABASE_URL when set (production always sets it); otherwise an
# embedded PostgreSQL under EMBEDDED_PGDATA, started on first connection.
# Two roles: the application connects as DATABASE_APP_ROLE (rows only, owns no table: core
# migration 0003 creates it and its grants); `migrate` connects as the tables' owner, the
# migration role (`postgres` on the embedded server; MIGRATION_DATABASE_URL's user and password,
# same server and database, with DATABASE_URL).
DATABASE_APP_ROLE = os.environ.get("DATABASE_APP_ROLE", "backoffice_app")
if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", DATABASE_APP_ROLE):
    raise ImproperlyConfigured("DATABASE_APP_ROLE must be a lower-case SQL name (letters, digits, _)")
_CONN_MAX_AGE = int(os.environ.get("CONN_MAX_AGE", "60"))
_db: dict[str, Any]
if os.environ.get("DATABASE_URL"):
    _db = dict(dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=_CONN_MAX_AGE, conn_health_checks=False))
    if os.environ.get("MIGRATION_DATABASE_URL"):
        _owner = dj_database_url.parse(os.environ["MIGRATION_DATABASE_URL"])
        _db["MIGRATION"] = {"USER": _owner["USER"], "PASSWORD": _owner["PASSWORD"]}
    # Our backend subclass: standard PostgreSQL, plus dbshell with the wheel's psql.
    _db["ENGINE"] = "config.embedded_pg"
    # dj-database-url keeps a unix-socket `?host=` in OPTIONS; dbshell wants HOST.
    if "host" in _db.get("OPTIONS", {}):
        _db["HOST"] = _db["OPTIONS"].pop("host")
elif PRODUCTION:
    raise ImproperlyConfigured("DATABASE_URL must be set when DEPLOYMENT_ENV=production")
else:
    _db = {
        "ENGINE": "config.embedded_pg",
        "NAME": "postgres",
        "USER": DATABASE_APP_ROLE,
        "MIGRATION": {"USER": "postgres", "PASSWORD": ""},
        "HOST": "",
        "CONN_MAX_AGE": _CONN_MAX_AGE,
        "CONN_HEALTH_CHECKS": False,  # no SELECT 1 a task: a broken connection fails its statement, and is closed
        "EMBEDDED_DATADIR": os.environ.get("EMBEDDED_PGDATA", str(BASE_DIR / ".pgdata")),
        "EMBEDDED_CLEANUP": os.environ.get("EMBEDDED_PG_CLEANUP") or None,
    }
# A statement or lock wait that hangs fails instead of blocking a worker forever.
_db.setdefault("OPTIONS", {})["options"] = "-c statement_timeout=60000 -c lock_timeout=30000"
# Parameters bound by the server and statements prepared after their fifth run: a stage's
# statements are planned once per connection, not on every call (bench/README.md). One
# command per execute(); not for a pooler in transaction mode (pgbouncer < 1.21).
_db["OPTIONS"]["server_side_binding"] = True
_db["OPTIONS"]["prepare_threshold"] = 5
DATABASES: dict[str, dict[str, Any]] = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
FORMAT_MODULE_PATH = ["config.formats"]  # times Django renders itself: to the second, as our presenter
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
# whitenoise serves the collected files itself (no DEBUG needed); production gets compressed,
# content-hashed names (`collectstatic` first: `make serve` does it).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

EMAIL_BACKEND = os.environ.get(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend" if PRODUCTION else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = os.environ.get("EMAIL_USE_TLS", "0") == "1"
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "backoffice@localhost")
if os.environ.get("EMAIL_FILE_PATH"):  # with EMAIL_BACKEND=...filebased.EmailBackend: one file per connection
    EMAIL_FILE_PATH = os.environ["EMAIL_FILE_PATH"]

if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = os.environ.get("SECURE_SSL_REDIRECT", "1") == "1"
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]  # probes over plain http on the private network
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")


# Custody (SPEC 5.5): the rotas a case's person and backup come from. Each names a Django group;
# CUSTODY_ROTA_<NAME> (comma-separated usernames, e.g. CUSTODY_ROTA_APPROVERS) replaces its members.
def _people(name: str) -> list[str]:
    return [u.strip() for u in os.environ.get(f"CUSTODY_ROTA_{name}", "").split(",") if u.strip()]


CUSTODY_ROTAS = {
    "approvers": {"group": "approvers", "people": _people("APPROVERS")},
    "operators on call": {"group": "operators", "people": _people("OPERATORS")},
}
# Notifications (ops.notify): links in messages start with BACKOFFICE_URL; a sender's claim outlives
# any send; a digest reader's digest goes out from this hour (UTC) each day.
BACKOFFICE_URL = os.environ.get("BACKOFFICE_URL", "http://127.0.0.1:8000").rstrip("/")
NOTIFY_CLAIM_SECONDS = int(os.environ.get("NOTIFY_CLAIM_SECONDS", "300"))
NOTIFY_DIGEST_HOUR = int(os.environ.get("NOTIFY_DIGEST_HOUR", "7"))
# Retention (ops.retention): days a record kind lives once its case closed; a closed case past
# closed_case (and decision_log) becomes a tombstone. The job works in batches within its budget.
RETENTION_DAYS = {
    "closed_case": int(os.environ.get("RETENTION_CLOSED_CASE_DAYS", "730")),
    "decision_log": int(os.environ.get("RETENTION_DECISION_LOG_DAYS", "730")),
    "lease_history": int(os.environ.get("RETENTION_LEASE_HISTORY_DAYS", "90")),
    "target_evidence": int(os.environ.get("RETENTION_TARGET_EVIDENCE_DAYS", "365")),
    "notifications": int(os.environ.get("RETENTION_NOTIFICATIONS_DAYS", "90")),
}
RETENTION_BATCH = 200
RETENTION_SECONDS = float(os.environ.get("RETENTION_SECONDS", "60"))
# A deletion request is due one calendar month after it was received (GDPR Art. 12(3)); an
# extension, with a reason, reaches at most three months after receipt.
DELETION_DEADLINE_MONTHS = int(os.environ.get("DELETION_DEADLINE_MONTHS", "1"))
DELETION_DEADLINE_MAX_MONTHS = int(os.environ.get("DELETION_DEADLINE_MAX_MONTHS", "3"))
DELETION_DEADLINE_WARNING_DAYS = int(os.environ.get("DELETION_DEADLINE_WARNING_DAYS", "7"))

# Deletion workflow (SPEC 3). The lease is a setting so tests can shorten real waits.
DELETION_LEASE_SECONDS = int(os.environ.get("DELETION_LEASE_SECONDS", "60"))
# Every process of a deployment reports at the same pace: the faces call a worker silent for three
# heartbeats "not reporting" (deletions.case.silent_since) by this setting, read in the web process.
DELETION_HEARTBEAT_SECONDS = int(os.environ.get("DELETION_HEARTBEAT_SECONDS", "0")) or max(
    1, DELETION_LEASE_SECONDS // 6
)
DELETION_HANDLER_BUDGET = 100
# A queued run stops starting new stages after this long and re-enqueues itself, so a
# cluster asked to stop (SIGTERM) waits at most this plus one stage, well inside the lease.
DELETION_TASK_SECONDS = int(os.environ.get("DELETION_TASK_SECONDS", "30"))
# Development/test knob: a dummy delay in every queued stage, to watch or interrupt work.
DELETION_DEMO_STAGE_DELAY_MS = int(os.environ.get("DELETION_DEMO_STAGE_DELAY_MS", "0"))
DELETION_APPROVAL_TTL_DAYS = int(os.environ.get("DELETION_APPROVAL_TTL_DAYS", "7"))
# Grants: the back-office signs each effect's grant (Ed25519, 32 bytes base64url; derived from
# SECRET_KEY when unset) and the target system checks it with the public key alone.
DELETION_GRANT_SIGNING_KEY = os.environ.get("DELETION_GRANT_SIGNING_KEY", "")
TARGET_GRANT_PUBLIC_KEY = os.environ.get("TARGET_GRANT_PUBLIC_KEY", "")  # empty: the signing key's own
# Receivers are registered target systems reached over HTTP (deletions.targets.http). Test machinery,
# refused in production: RECEIVER_IN_PROCESS=receiver.http.application hands the same signed requests
# to the reference receiver's WSGI application in this process instead of a socket (the suite and the
# chaos run, whose target database is wrapped in their transactions); the receiver's own settings
# below are read only then (in its own process, receiver/settings.py has them).
RECEIVER_IN_PROCESS = os.environ.get("RECEIVER_IN_PROCESS", "")
RECEIVER_PUBLIC_URL = os.environ.get("RECEIVER_PUBLIC_URL", "")  # the mounted receiver's: the URL registered for it
# Receivers' TLS certificates are checked against this file's CA certificates (a private CA, or a
# receiver's own self-signed certificate) instead of the public ones, when set.
RECEIVER_CA_FILE = os.environ.get("RECEIVER_CA_FILE", "")
if RECEIVER_CA_FILE and not os.path.isfile(RECEIVER_CA_FILE):
    raise ImproperlyConfigured(f"RECEIVER_CA_FILE names no readable file: {RECEIVER_CA_FILE[:200]}")
RECEIVER_SIGNING_KEY = os.environ.get("RECEIVER_SIGNING_KEY", "")
RECEIVER_KEY_ID = os.environ.get("RECEIVER_KEY_ID", "receiver-1")
RECEIVER_CALLER_KEYS: dict[str, str] = {}
# Proofs of a case (core.proofs): signed with PROOF_SIGNING_KEY (derived from SECRET_KEY when unset),
# checked with PROOF_PUBLIC_KEY (empty: the signing key's own).
PROOF_SIGNING_KEY = os.environ.get("PROOF_SIGNING_KEY", "")
PROOF_PUBLIC_KEY = os.environ.get("PROOF_PUBLIC_KEY", "")

# django-q2: our leases, never the queue, decide who executes a stage, so the
# queue's own retries stay off (max_attempts 1) and timeout stays below retry.
Q_CLUSTER = {
    "name": "backoffice",  # the queue every cluster of this site shares
    "workers": int(os.environ.get("Q_WORKERS", "2")),
    # timeout: a run stops itself after DELETION_TASK_SECONDS plus one stage; retry far above.
    "timeout": 300,
    "retry": 900,
    "max_attempts": 1,
    "ack_failures": True,
    "queue_limit": int(os.environ.get("Q_WORKERS", "2")),
    "save_limit": 0,  # keep every result, prune none per task; ops.schedules.prune_results deletes old ones
    "orm": "default",
    "broker_class": "core.broker.Broker",  # the ORM broker, one statement per call (core/broker.py)
    "catch_up": False,
    # The control cluster (`Q_CLUSTER_NAME=control`, started beside the stage cluster by
    # run_workers): the heartbeat, the dispatcher, the watchers and their notices run there, so
    # long stages filling every stage worker can never make them wait.
    "ALT_CLUSTERS": {
        "control": {
            "workers": int(os.environ.get("Q_CONTROL_WORKERS", "2")),
            "queue_limit": int(os.environ.get("Q_CONTROL_WORKERS", "2")),
        }
    },
}
if os.environ.get("REDIS_URL"):
    Q_CLUSTER.pop("orm")
    Q_CLUSTER.pop("broker_class")
    Q_CLUSTER["redis"] = os.environ["REDIS_URL"]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"()": "core.logs.ReadableFormatter", "format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "core.logs.JsonFormatter"},
    },
    "filters": {
        "http_request_id": {"()": "core.logs.HttpRequestIdFilter"},
        "expected_failures": {"()": "core.logs.ExpectedFailureFilter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": os.environ.get("LOG_FORMAT", "json" if PRODUCTION else "plain"),
            "filters": ["http_request_id"],
        }
    },
    "loggers": {
        "deletions": {
            "handlers": ["console"],
            "level": os.environ.get("LOG_LEVEL", "INFO" if PRODUCTION else "WARNING"),
        },
        "config": {"handlers": ["console"], "level": "WARNING"},
        "retirements": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
        "ops": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
        # Every 500 with its traceback (Django logs them here), and security refusals (bad host, CSRF).
        "django.request": {"handlers": ["console"], "level": "WARNING", "propagate": False},
        "django.security": {"handlers": ["console"], "level": "WARNING", "propagate": False},
        "axes": {"handlers": ["console"], "level": "WARNING", "propagate": False},
        "django-q": {
            "handlers": ["console"],
            "filters": ["expected_failures"],
            "level": os.environ.get("Q_LOG_LEVEL", "INFO" if PRODUCTION else "WARNING"),
            "propagate": False,
        },
    },
}

TEST_RUNNER = "config.test_runner.PytestRunner"

# Workspace retirement (SPEC 4).
# A notice claim outlives any send; a sender that died is replaced after it (at least once).
# A watcher tick stops stepping after this long (the schedule runs each minute); what is left
# stays due for the next tick.
RETIREMENT_TICK_SECONDS = float(os.environ.get("RETIREMENT_TICK_SECONDS", "40"))
RETIREMENT_NOTICE_CLAIM_SECONDS = int(os.environ.get("RETIREMENT_NOTICE_CLAIM_SECONDS", "300"))
RETIREMENT_PURGE_LEASE_SECONDS = int(os.environ.get("RETIREMENT_PURGE_LEASE_SECONDS", "60"))
RETIREMENT_DISPOSABLE_WAIT_SECONDS = int(os.environ.get("RETIREMENT_DISPOSABLE_WAIT_SECONDS", "600"))
# The staff person (a username) who owns a retirement the system stopped: a hold at the point of
# no return, a refused purge. Unset: the first active staff member allowed to hold retirements.
RETIREMENT_ON_CALL = os.environ.get("RETIREMENT_ON_CALL", "")
# A watcher may run a year (seed 002): an alarm comes 30 days before a request reaches this age,
# and when a hold lasts longer than the hold limit.
RETIREMENT_WATCHER_LIFETIME_DAYS = int(os.environ.get("RETIREMENT_WATCHER_LIFETIME_DAYS", "365"))
RETIREMENT_HOLD_ALARM_DAYS = int(os.environ.get("RETIREMENT_HOLD_ALARM_DAYS", "90"))
RETIREMENT_NOTICE_RECIPIENTS = [
    e.strip()
    for e in os.environ.get("RETIREMENT_NOTICE_RECIPIENTS", "" if PRODUCTION else "hq-staff@localhost").split(",")
    if e.strip()
]
