"""Where the browser tests find Debian's chromium and put their screenshots."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
PASSWORD = "browser-test-pw-1"


def require_chromium() -> None:
    """Call at a test module's top: CI fails without chromium, a laptop skips (and says why)."""
    if Path(CHROMIUM).exists():
        return
    if os.environ.get("CI"):
        raise RuntimeError("CI needs Debian's chromium for the browser tests: .ci/run installs it")
    pytest.skip(
        "Debian's chromium is not installed (apt-get install chromium); CI installs it", allow_module_level=True
    )
