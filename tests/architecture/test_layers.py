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

PACKAGES = ("config", "core", "deletions", "retirements", "api", "ops", "receiver", "wire")
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
    assert "10 kept, 0 broken" in ran.stdout


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
        # A workflow reaching into the API, a face above it.
        ("deletions/services.py", "import api.views", "only config and ops import the API"),
        # The shape inside an app.
        (
            "deletions/rules/workflow.py",
            "from deletions.store import stages",
            "pure policy imports no store, no admin and no models",
        ),
        ("retirements/case.py", "import core.admin", "pure policy imports no store, no admin and no models"),
        ("deletions/store/stages.py", "from deletions import retry", "the stores ask no policy"),
        # What both sides agree on reaching into either side; a receiver reaching into the back-office.
        (
            "wire/grants.py",
            "import core.clock",
            "wire, what the back-office and a receiver agree on, imports nothing of ours",
        ),
        (
            "receiver/signing.py",
            "from core import grants",
            "the receiver is a separate system: it imports nothing of ours but wire",
        ),
        (
            "deletions/handlers.py",
            "from deletions import transition",
            "handlers perform effects and never choose what runs next",
        ),
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


PURE = [
    "deletions/contract.py",
    "retirements/contract.py",
    "deletions/authority.py",
    "deletions/retry.py",
    "deletions/case.py",
    "deletions/receipts.py",
    "retirements/policy.py",
    "retirements/case.py",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "deletions" / "rules").glob("*.py")),
]


@pytest.mark.parametrize("module", PURE)
def test_pure_policy_imports_neither_the_orm_nor_the_admin(module: str) -> None:
    """import-linter sees our packages only; Django's ORM and admin are checked here."""
    imported = _imports(ROOT / module)
    bad = {m for m in imported if m.startswith(("django.db", "django.contrib.admin", "django.core.mail"))}
    assert not bad, f"{module} imports {sorted(bad)}"


@pytest.mark.parametrize("module", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "wire").glob("*.py")))
def test_wire_imports_no_django(module: str) -> None:
    """What the back-office and a receiver agree on installs without Django: each side passes in what its
    settings say (import-linter sees our packages only; Django is checked here)."""
    imported = _imports(ROOT / module)
    bad = {m for m in imported if m == "django" or m.startswith("django.")}
    assert not bad, f"{module} imports {sorted(bad)}"


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_no_module_of_ours_takes_part_in_an_import_circle() -> None:
    """Imports read from the source, function-local ones included: no two modules of ours reach
    each other (a circle held apart by an import inside a function counts)."""
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            modules[name] = path
    graph = {
        name: {m for m in (_owner(i, modules) for i in _imports(path)) if m and m != name}
        for name, path in modules.items()
    }
    circles = [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]
    assert circles == [], circles


def _owner(imported: str, modules: dict[str, Path]) -> str | None:
    """The module of ours an import names (`a.b.c` may be module `a.b` and its attribute `c`)."""
    while imported:
        if imported in modules:
            return imported
        imported = imported.rpartition(".")[0]
    return None


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative enough for a few hundred modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            found.append(component)

    for v in graph:
        if v not in index:
            visit(v)
    return found
