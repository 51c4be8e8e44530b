"""The README's walkthrough runs exactly as written, against the test database."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.conftest import ROOT, subprocess_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def walkthrough() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("<!-- walkthrough:start -->")[1].split("<!-- walkthrough:end -->")[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    assert len(blocks) >= 6
    return "\n".join(blocks)


def test_readme_walkthrough_runs_as_written() -> None:
    script = "set -euo pipefail\n" + walkthrough()
    proc = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert out.count("(0 rows)") >= 1  # zero stage rows right after approval
    assert "request completed (5 stages)" in out
    assert "already completed" in out
    assert "Exit code: 1" in out and "(retry not due yet)" in out
    assert "not due until" in proc.stderr
    assert "community_complete" in out
    assert out.rstrip().endswith("(1 row)")
