"""pytest plugin used by `manage.py rehearse`: writes each test's outcome and observation."""

from __future__ import annotations

import json
import os
from typing import Any

_results: dict[str, dict[str, Any]] = {}


def pytest_runtest_logreport(report: Any) -> None:
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "observed": [], "message": ""})
    if report.failed:
        entry["outcome"] = "failed"
        entry["message"] = str(report.longrepr).strip().splitlines()[-1][:300] if report.longrepr else ""
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"
    for name, value in report.user_properties:
        if name == "observed" and value not in entry["observed"]:
            entry["observed"].append(value)
    if report.when == "call":
        entry["seconds"] = round(report.duration, 2)


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    path = os.environ.get("REHEARSAL_REPORT")
    if path:
        with open(path, "w") as fh:
            json.dump(_results, fh)
