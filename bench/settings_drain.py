"""The drain's cluster settings: the project's, with django-q2 options from `BENCH_Q_OPTIONS`
(JSON) laid over them, so the bench can measure an option before the project takes it."""

import json
import os

from config.settings import *  # noqa: F403
from config.settings import Q_CLUSTER

Q_CLUSTER.update(json.loads(os.environ.get("BENCH_Q_OPTIONS", "{}")))
