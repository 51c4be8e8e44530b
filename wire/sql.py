"""Named SQL statements, kept in one `.sql` file per store (in the manner of procrastinate's
`queries.sql`): each statement follows a `-- name: <name>` line and uses `%(param)s` placeholders.

A store loads its file once and runs a statement by name; the file is the only place a store's
writes are spelled, so a reader (and a test) finds every write of a table in one place. The
back-office's stores (through `core.sql`) and the receiver's load their files the same way.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

# How often each statement was asked for in this process, by "file:name": the test suite reports
# the statements it never ran (tests/conftest.py), so a writer no test reaches is seen.
USED: Counter[str] = Counter()
LOADED: list[Statements] = []

_NAME = re.compile(r"^-- name: ([a-z_]+)\s*$", re.MULTILINE)


class Statements:
    def __init__(self, path: Path) -> None:
        self.path = path
        text = path.read_text()
        parts = _NAME.split(text)
        self._sql: dict[str, str] = {}
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            sql = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("--")).strip()
            if name in self._sql:
                raise ValueError(f"{path.name}: statement {name!r} is named twice")
            self._sql[name] = sql.rstrip(";")
        LOADED.append(self)

    @classmethod
    def beside(cls, module_file: str, name: str) -> Statements:
        return cls(Path(module_file).with_name(name))

    def names(self) -> list[str]:
        return list(self._sql)

    def sql(self, name: str) -> str:
        USED[f"{self.path.name}:{name}"] += 1
        return self._sql[name]

    def one(self, cur: Any, name: str, **params: Any) -> tuple[Any, ...] | None:
        """Run a statement and return its first row (None when it touched or found nothing)."""
        cur.execute(self.sql(name), params)
        # Whether the statement returns rows, from psycopg's result: `description` would build a
        # column object for each column of the result on every call (a stage runs five statements).
        result = cur.pgresult
        return cur.fetchone() if result is not None and result.nfields else None

    def run(self, cur: Any, name: str, **params: Any) -> int:
        """Run a statement; the number of rows it touched."""
        cur.execute(self.sql(name), params)
        return int(cur.rowcount)
