"""`manage.py rehearse` runs the rehearsal tables on a scratch database and fills in Actual result."""

from __future__ import annotations

import subprocess

import pytest

from ops.rehearsal import ROWS
from tests.conftest import ROOT, manage_argv, subprocess_env

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def test_rehearse_prints_both_tables_with_observed_results() -> None:
    proc = subprocess.run(
        manage_argv("rehearse"), cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for row in ROWS:
        line = next(line for line in out.splitlines() if line.startswith(f"| {row.failure} |"))
        assert "| passed " in line and "evidence asserted" not in line, line
    total = sum(len(r.tests) for r in ROWS)
    assert f"{total} of {total} rehearsal checks passed on a scratch database" in out
