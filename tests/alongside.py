"""Tests marked `alongside` run in a pytest process of their own, beside the rest of the suite.

Such a test spends minutes of real time in processes of its own (the saturation test keeps two
stage workers busy for 4 minutes; the walkthroughs wait out a retry's 30 s delay; the rehearsal
runs its tables in a pytest of its own), little of it in this session's process. When a session selects it together with
other tests, it starts at once in a child pytest with its own throw-away embedded PostgreSQL (so
neither session flushes the other's tables), and its own item, moved to the end of the session,
waits for the child and reports the child's outcome for it: passed, failed with the child's
failure and output, or skipped with its reason. Run alone, or with `DATABASE_URL` (one server,
one test database name), it runs in this session as any other test.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

MARK = "alongside"
CHILD_ENV = "BACKOFFICE_ALONGSIDE_CHILD"


@dataclass
class Child:
    proc: subprocess.Popen[bytes]
    report: Path
    output: Path

    def outcome(self, item: pytest.Item) -> tuple[str, str]:
        """('passed' | 'failed' | 'skipped', what the child said) for one of its tests."""
        self.proc.wait()
        tail = self.output.read_text(errors="replace")[-6000:]
        if not self.report.exists():
            return "failed", f"the child pytest wrote no report (exit code {self.proc.returncode}):\n{tail}"
        module, _, name = item.nodeid.partition("::")
        classname = module.removesuffix(".py").replace("/", ".")
        for case in ET.parse(self.report).iter("testcase"):
            if case.get("classname") == classname and case.get("name") == name:
                for kind in ("failure", "error"):
                    found = case.find(kind)
                    if found is not None:
                        said = f"{found.get('message', '')}\n{found.text or ''}"
                        return "failed", f"{said}\n--- the child's output ---\n{tail}"
                skipped = case.find("skipped")
                if skipped is not None:
                    return "skipped", skipped.get("message", "skipped in the child")
                return "passed", ""
        return "failed", f"the child's report does not name {item.nodeid} (exit code {self.proc.returncode}):\n{tail}"


CHILD_KEY = pytest.StashKey[Child]()


def register(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARK}: runs in a pytest process of its own beside the rest of the suite (real time, little CPU)"
    )


def start(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With other tests selected too, the `alongside` ones start now in a child pytest and move to
    the end of this session, where each reports what the child found."""
    if os.environ.get(CHILD_ENV) or os.environ.get("DATABASE_URL") or config.option.collectonly:
        return
    beside = [item for item in items if item.get_closest_marker(MARK)]
    if not beside or len(beside) == len(items):
        return
    folder = Path(tempfile.mkdtemp(prefix="backoffice-alongside-"))
    report, output = folder / "report.xml", folder / "output.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDDED_PG")}  # its own server
    env[CHILD_ENV] = "1"
    with output.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
            + [item.nodeid for item in beside],
            cwd=config.rootpath,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    config.stash[CHILD_KEY] = Child(proc, report, output)
    items[:] = [item for item in items if item not in beside] + beside  # their outcomes are read last


def report(pyfuncitem: pytest.Function) -> bool | None:
    """In place of running an `alongside` test here: wait for the child and say what it found."""
    child = pyfuncitem.config.stash.get(CHILD_KEY, None)
    if child is None or not pyfuncitem.get_closest_marker(MARK):
        return None
    outcome, said = child.outcome(pyfuncitem)
    if outcome == "failed":
        pytest.fail(f"{pyfuncitem.nodeid} failed in its own pytest process:\n{said}", pytrace=False)
    if outcome == "skipped":
        pytest.skip(said)
    return True


def stop(config: pytest.Config) -> None:
    """A session that ends early stops its child as Ctrl-C would (the test's own clean-up runs);
    then the child's report and output go."""
    child = config.stash.get(CHILD_KEY, None)
    if child is None:
        return
    if child.proc.poll() is None:
        child.proc.send_signal(signal.SIGINT)
        try:
            child.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(child.proc.pid, signal.SIGKILL)
            child.proc.wait()
    shutil.rmtree(child.report.parent, ignore_errors=True)
