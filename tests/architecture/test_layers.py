"""The layout holds: import-linter's contracts pass on the tree and fail on a wrong import;
migrations are frozen (no project code)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGES = ("config", "core", "deletions", "retirements", "ops")
LINT = str(Path(sys.executable).with_name("lint-imports"))  # the one `make check` runs


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LINT, "--no-cache"], cwd=tree, capture_output=True, text=True, timeout=240)


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    tree = tmp_path_factory.mktemp("tree")
    for name in PACKAGES:
        shutil.copytree(ROOT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_tree_keeps_every_contract(copy: Path) -> None:
    ran = lint(copy)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "3 kept, 0 broken" in ran.stdout


@pytest.mark.parametrize(
    ("module", "wrong", "contract"),
    [
        # One workflow reaching into the other.
        ("deletions/worker.py", "import retirements.models", "the workflows never import each other"),
        ("retirements/watcher.py", "from deletions import store", "the workflows never import each other"),
        # The base reaching up.
        ("core/clock.py", "import deletions.models", "core imports no app of ours"),
        # A workflow reaching into ops.
        ("retirements/services.py", "import ops.health", "nothing imports ops except config"),
    ],
)
def test_a_wrong_import_breaks_its_contract(copy: Path, tmp_path: Path, module: str, wrong: str, contract: str) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(copy, tree)
    target = tree / module
    target.write_text(target.read_text() + f"\n{wrong}  # deliberately wrong\n")
    ran = lint(tree)
    assert ran.returncode == 1, ran.stdout
    report = " ".join(ran.stdout.split())  # import-linter wraps long contract names
    assert f"{contract} BROKEN" in report, ran.stdout


FORBIDDEN = set(PACKAGES) - {"config"}


@pytest.mark.parametrize("migration", sorted(p.relative_to(ROOT) for p in ROOT.glob("*/migrations/0*.py")), ids=str)
def test_migrations_import_no_project_code(migration: Path) -> None:
    tree = ast.parse((ROOT / migration).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN, f"{migration} imports {sorted(imported & FORBIDDEN)}"
