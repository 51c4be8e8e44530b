import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ops.rehearsal import ROWS, node_ids


class Command(BaseCommand):
    help = "Run the rehearsal tables (seed 003 failures, seed 000 restart points) on a scratch database."

    def handle(self, *args: Any, **options: Any) -> None:
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
            results = json.loads(report.read_text())
        failed = 0
        for table in ("seed 003", "seed 000"):
            self.stdout.write(f"\n{'Failure to try' if table == 'seed 003' else 'Restart point'} ({table})")
            self.stdout.write("| Failure | Required evidence | Actual result |")
            self.stdout.write("| --- | --- | --- |")
            for row in (r for r in ROWS if r.table == table):
                actual = []
                for test in row.tests:
                    res = results.get(test, {"outcome": "not run", "observed": [], "message": ""})
                    name = test.split("::")[-1]
                    if res["outcome"] != "passed":
                        failed += 1
                        actual.append(f"{res['outcome'].upper()} {name}: {res['message']}")
                    else:
                        seen = "; ".join(res["observed"]) or "evidence asserted"
                        actual.append(f"passed {name} ({res.get('seconds', 0)} s): {seen}")
                self.stdout.write(f"| {row.failure} | {row.required} | {' / '.join(actual)} |")
        total = sum(len(r.tests) for r in ROWS)
        self.stdout.write(f"\n{total - failed} of {total} rehearsal checks passed on a scratch database")
        if failed:
            raise CommandError(f"{failed} rehearsal check(s) failed", returncode=1)
