import os
import sys

from django.core.exceptions import ImproperlyConfigured
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
try:
    application = get_wsgi_application()
except ImproperlyConfigured as refused:  # a setting refused: one line, and the server does not start
    sys.stderr.write(f"configuration refused: {' '.join(str(refused).split())}\n")
    sys.exit(3)  # gunicorn's "worker failed to boot": the arbiter stops instead of retrying

from core import rollout

try:
    rollout.require_known_schema()
except rollout.NewerSchema as refused:
    sys.stderr.write(f"{refused}\n")
    sys.exit(3)
