import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ops.rehearsal import ROWS, node_ids

TABLES = (("seed 003", "Failure to try"), ("seed 000", "Restart point"), ("seed 002", "Failure to try"))


class Command(BaseCommand):
    help = "Run the rehearsal tables (seeds 003, 000 and 002) on a scratch database and print the Actual results."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", choices=["text", "markdown", "json"], default="text")
        parser.add_argument(
            "--json-out", metavar="FILE", help="also write the rows as JSON to FILE (one rehearsal, two forms)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        results = self.run_tests()
        rows = [
            {
                "table": row.table,
                "failure": row.failure,
                "required": row.required,
                "tests": [test.split("::")[-1] for test in row.tests],
                "passed": all(results.get(t, {}).get("outcome") == "passed" for t in row.tests),
                "observed": [self.observed(t, results.get(t)) for t in row.tests],
            }
            for row in ROWS
        ]
        fmt = options["format"]
        if options["json_out"]:
            Path(options["json_out"]).write_text(json.dumps(rows, indent=2))
        if fmt == "json":
            self.stdout.write(json.dumps(rows, indent=2))
        else:
            self.render(rows, markdown=fmt == "markdown")
        failed = [r for r in rows if not r["passed"]]
        if fmt != "json":
            self.stdout.write(f"\n{len(rows) - len(failed)} of {len(rows)} rehearsal rows passed on a scratch database")
        if failed:
            raise CommandError(f"{len(failed)} rehearsal row(s) failed", returncode=1)

    def run_tests(self) -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp) / "report.json"
            # Always a throw-away embedded server (config.settings_test): never the working
            # database, and never a test database another run may be using.
            drop = ("DJANGO_SETTINGS_MODULE", "EMBEDDED_PGDATA", "EMBEDDED_PG_CLEANUP", "DATABASE_URL")
            env = {k: v for k, v in os.environ.items() if k not in drop}
            env["REHEARSAL_REPORT"] = str(report)
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "tests.rehearsal_plugin", *node_ids()],
                cwd=settings.BASE_DIR,
                env=env,
                capture_output=True,
                text=True,
            )
            if not report.exists():
                raise CommandError(f"the rehearsal did not run: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
            results: dict[str, Any] = json.loads(report.read_text())
            return results

    @staticmethod
    def observed(test: str, result: dict[str, Any] | None) -> str:
        name = test.split("::")[-1]
        if result is None:
            return f"NOT RUN {name}"
        if result["outcome"] != "passed":
            return f"{result['outcome'].upper()} {name}: {result['message']}"
        return "; ".join(result["observed"]) or f"passed {name} (no observation recorded)"

    def render(self, rows: list[dict[str, Any]], *, markdown: bool) -> None:
        for table, heading in TABLES:
            self.stdout.write(f"\n{heading} ({table})")
            if markdown:
                self.stdout.write(f"| {heading} | Required evidence | Actual result |")
                self.stdout.write("| --- | --- | --- |")
            for row in (r for r in rows if r["table"] == table):
                mark = "passed" if row["passed"] else "FAILED"
                actual = f"{mark}: " + " / ".join(row["observed"])
                if markdown:
                    self.stdout.write(f"| {row['failure']} | {row['required']} | {actual} |")
                else:
                    self.stdout.write(f"- {row['failure']}\n    required: {row['required']}\n    actual:   {actual}")
