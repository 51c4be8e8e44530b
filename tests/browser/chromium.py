"""Where the browser tests find Debian's chromium and put their screenshots."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# `make test` runs bin/need-chromium first (it installs chromium or fails saying how); CHROMIUM names another.
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or ""
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
PASSWORD = "browser-test-pw-1"


def require_chromium() -> None:
    """Call at a test module's top: without chromium the module fails in one line saying how to get
    it, never a skip."""
    if CHROMIUM and Path(CHROMIUM).exists():
        return
    pytest.fail(
        "the browser tests need Debian's chromium: run 'sudo apt-get install chromium' "
        "(or set CHROMIUM=/path/to/chromium); `make test` installs it when it can",
        pytrace=False,
    )
