"""`manage.py rehearse` runs the rehearsal tables on a scratch database and fills in Actual result."""

from __future__ import annotations

import json
import subprocess

import pytest

from ops.rehearsal import ROWS
from tests.conftest import ROOT, manage_argv, subprocess_env

pytestmark = [pytest.mark.django_db, pytest.mark.slow, pytest.mark.alongside]  # its own process (tests.alongside)


def rehearse(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        manage_argv("rehearse", *args), cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=900
    )


@pytest.mark.timeout(1000)  # a rehearsal of up to 900 s, on a loaded machine
def test_rehearse_prints_every_row_with_observed_results_in_each_format(tmp_path) -> None:
    """One rehearsal, printed as markdown and written as JSON (`--json-out`); both from what it observed."""
    saved = tmp_path / "rows.json"
    markdown = rehearse("--format", "markdown", "--json-out", str(saved))
    assert markdown.returncode == 0, markdown.stdout[-3000:] + markdown.stderr[-3000:]
    rows = json.loads(saved.read_text())
    assert [(r["table"], r["failure"], r["required"]) for r in rows] == [(r.table, r.failure, r.required) for r in ROWS]
    for row in rows:
        assert set(row) == {"table", "failure", "required", "tests", "passed", "observed"}
        assert row["passed"] is True and len(row["observed"]) == len(row["tests"]), row
        assert not any("no observation recorded" in text for text in row["observed"]), row
    for row in ROWS:
        line = next(line for line in markdown.stdout.splitlines() if line.startswith(f"| {row.failure} |"))
        assert f"| {row.required} | passed: " in line, line
    assert f"{len(ROWS)} of {len(ROWS)} rehearsal rows passed on a scratch database" in markdown.stdout
