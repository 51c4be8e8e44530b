"""`manage.py test` hands over to pytest, running the same suite as `make test`."""

import os
import subprocess
import sys
from typing import Any


class PytestRunner:
    def __init__(self, verbosity: int = 1, failfast: bool = False, keepdb: bool = False, **kwargs: Any) -> None:
        self.verbosity = verbosity
        self.failfast = failfast
        self.keepdb = keepdb

    def run_tests(self, test_labels: list[str], **kwargs: Any) -> int:
        argv = [sys.executable, "-m", "pytest"]
        if self.verbosity == 0:
            argv.append("--quiet")
        elif self.verbosity > 1:
            argv.append("--verbose")
        if self.failfast:
            argv.append("--exitfirst")
        if self.keepdb:
            argv.append("--reuse-db")
        argv.extend(test_labels)
        # pytest picks its own settings (pytest.ini) in a fresh process.
        env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
        return subprocess.call(argv, env=env)
