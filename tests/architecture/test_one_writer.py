"""Each state move has one writer, read from the source: hand-written writes live only in the
stores' named statements (`*.sql`), the stage path's tables are written by nothing else, and no
statement is named twice or left unused by the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from core.sql import Statements
from tests.conftest import ROOT

APPS = ("core", "deletions", "retirements", "api", "ops", "config")
OUR_TABLE = r"(entity_deletion_\w+|retirements_\w+)"  # the demo application (its own database) is another system
WRITE = re.compile(rf"\b(UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+{OUR_TABLE}", re.IGNORECASE)


def sources() -> list[Path]:
    return [p for app in APPS for p in (ROOT / app).rglob("*.py") if "migrations" not in p.parts]


def statement_files() -> list[Path]:
    return sorted(p for app in APPS for p in (ROOT / app).rglob("*.sql"))


def test_hand_written_writes_live_only_in_named_statements() -> None:
    found = {
        f"{p.relative_to(ROOT)}: {m.group(0)}" for p in sources() for m in WRITE.finditer(p.read_text())
    }  # fmt: skip
    assert found == set(), sorted(found)
    assert statement_files(), "no statements found: the walk is wrong"


# The stage path's moves, each one statement of deletions/store/stages.sql (the only writer of
# these two tables: no ORM write of them anywhere).
STAGE_MOVES = {
    "start a request (approved → running, first stage)": "start_request",
    "resume a re-approved request": "resume_approved",
    "start a stage (running mark, attempt opened)": "begin_stage",
    "submit its effect": "submit_stage",
    "save its result (completed; the next step in the same transaction)": "save_result",
    "fail it (retry or escalate)": "fail_stage",
    "set it aside (refused at the receiver)": "set_aside",
    "advance to the successor": "advance",
    "complete the request": "complete",
    "cancel at a stage boundary": "cancel_at_boundary",
    "confirm an effect not applied": "clear_submitted",
}
WATCHER_MOVES = {
    "beat": ("steps.sql", "beat"),
    "claim due notices": ("notices.sql", "claim_due"),
    "re-check a notice's claim just before its send": ("notices.sql", "still_held"),
    "record what was sent": ("notices.sql", "record_delivered"),
    "record a failed send (retry or give up)": ("notices.sql", "record_failed"),
    "re-plan or suppress notices, each with why": ("notices.sql", "replan"),
    "wait": ("steps.sql", "wait"),
    "settle or supersede a watcher": ("requests.sql", "settle_watcher"),
    "hold (a person, or the verdict at the point of no return)": ("requests.sql", "hold"),
    "verdict: sleep while held": ("steps.sql", "sleep"),
    "end without purge (a person's cancel, the verdict's close)": ("requests.sql", "end_without_purge"),
    "verdict: pass the point of no return": ("steps.sql", "begin_execution"),
    "claim the purge": ("purge.sql", "claim"),
    "purge (job done, workspace deleted, request completed)": ("purge.sql", "purged"),
    "refuse the purge": ("purge.sql", "refused"),
}


def test_the_stage_path_tables_have_no_orm_writer() -> None:
    orm_write = re.compile(r"\b(StageHistory|StageAttempt)\.objects\.[\w().=, ]*?(create|update|delete|bulk_)")
    saves = re.compile(r"\b(row|stage|attempt)\.(save|delete)\(")
    offenders = []
    for p in sources():
        text = p.read_text()
        offenders += [f"{p.relative_to(ROOT)}: {m.group(0)}" for m in orm_write.finditer(text)]
        if p.parent.name == "store" and "deletions" in p.parts:
            offenders += [f"{p.relative_to(ROOT)}: {m.group(0)}" for m in saves.finditer(text)]
    assert offenders == []


@pytest.mark.parametrize(("move", "name"), STAGE_MOVES.items())
def test_each_stage_move_is_one_statement_used_once(move: str, name: str) -> None:
    stages = Statements(ROOT / "deletions" / "store" / "stages.sql")
    assert name in stages.names(), move
    assert re.search(r"\b(UPDATE|INSERT)\b", stages.sql(name)), f"{name} writes nothing"
    assert _callers(name, near=ROOT / "deletions" / "store" / "stages.sql"), f"{move}: statement {name} is never run"


OTHER_MOVES = {
    **{move: f"retirements/store/{file}:{name}" for move, (file, name) in WATCHER_MOVES.items()},
    "an operator resumes a stopped deletion": "deletions/store/requests.sql:resume",
    "a cancellation that ends the request now": "deletions/store/requests.sql:cancel_outright",
    "a cancellation recorded (a live worker, or one to settle)": "deletions/store/requests.sql:cancel_recorded",
    "claim a lease": "deletions/store/leases.sql:claim",
    "release a lease": "deletions/store/leases.sql:release",
    "a person closes a retirement alarm no move answers": "retirements/store/decisions.sql:close_alarm",
}


@pytest.mark.parametrize(("move", "where"), OTHER_MOVES.items())
def test_each_other_move_is_one_statement(move: str, where: str) -> None:
    file, name = where.split(":")
    assert name in Statements(ROOT / file).names(), move
    assert _callers(name, near=ROOT / file), f"{move}: statement {name} is never run"


def test_no_statement_is_unused_or_named_twice() -> None:
    unused = []
    for path in statement_files():
        statements = Statements(path)  # refuses a name given twice
        unused += [f"{path.name}:{n}" for n in statements.names() if not _callers(n, near=path)]
    assert unused == []


def test_retired_writers_are_gone() -> None:
    """The second writers the fast path once stood beside: no module defines them any more."""
    gone = {
        "mark_running", "mark_submitted", "save_success", "complete_and_advance", "initialize", "_insert",
        "beat_quick", "claim_due_quick", "record_and_wait", "beat_watcher", "lock_due_slots", "claim_slot",
        "waits_for_eligibility", "fsm_target", "due_slot_ids", "_quick_step",
    }  # fmt: skip
    defined = {
        f"{p.relative_to(ROOT)}:{node.name}"
        for p in sources()
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.FunctionDef) and node.name in gone
    }
    assert defined == set()


def _callers(name: str, near: Path | None = None) -> list[str]:
    """Python places that run the statement: `SQL.one(cur, name, ...)`, `SQL.run(cur, name, ...)`
    or `SQL.sql(name)` (a bare string equal to a name, such as a verdict's, does not count)."""
    places = []
    for p in sources():
        if near is not None and (p.parent != near.parent or f'"{near.name}"' not in p.read_text()):
            continue  # only the modules that load this statement file
        for node in ast.walk(ast.parse(p.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in ("one", "run", "sql") or not _is_name(node.func.value, "SQL"):
                continue
            named = node.args[1] if node.func.attr in ("one", "run") and len(node.args) > 1 else None
            named = node.args[0] if node.func.attr == "sql" and node.args else named
            if isinstance(named, ast.Constant) and named.value == name:
                places.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    return places


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def test_the_statement_walk_finds_what_it_should_and_nothing_else() -> None:
    """A guard on `_callers` itself: a statement is found where it runs, a mere string is not."""
    assert _callers("begin_stage") == [
        p for p in _callers("begin_stage") if p.startswith("deletions/store/stages.py")
    ] != []  # fmt: skip
    assert _callers("no_such_statement") == []
    assert _callers("wait", near=ROOT / "retirements" / "store" / "steps.sql")  # run by SQL.run(cur, "wait")
    assert not _callers("wait", near=ROOT / "retirements" / "store" / "notices.sql")  # only policy's WAIT there


@pytest.mark.parametrize("app", ["deletions", "retirements"])
def test_selectors_only_read(app: str) -> None:
    text = (ROOT / app / "selectors.py").read_text()
    writes = re.findall(r"\.(save|create|update|delete|bulk_create|get_or_create|update_or_create)\(", text)
    assert writes == [], writes
