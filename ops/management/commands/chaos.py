import contextlib
import json
import os
import random
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError, CommandParser

from core.commands import ServiceCommand
from core.errors import shown
from ops import chaos
from samples.demo import inprocess
from wire import keys


class Command(ServiceCommand):
    help = (
        "Chaos run: K real workers over M requests on a scratch PostgreSQL, with random SIGKILL, SIGSTOP past "
        "the lease, cancellations, revoked approvals and (--db-restarts) abrupt database restarts; then checks "
        "the outcome. The last line is one JSON object; exit 1 on any duplicate effect, stale write or lost request."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seconds", type=float, default=60)
        parser.add_argument("--workers", type=int, default=3)
        parser.add_argument("--requests", type=int, default=20)
        parser.add_argument("--db-restarts", action="store_true")
        parser.add_argument("--seed", type=int, default=None, help="random seed (printed, for a rerun)")
        parser.add_argument("--settle-seconds", type=float, default=180)
        parser.add_argument(
            "--keep",
            metavar="DIR",
            default="",
            help="keep the run's database in DIR (a new or empty folder), stopped cleanly, and print how to query it",
        )
        # Internal: the same command in its other roles.
        parser.add_argument("--role", choices=["outer", "inner", "worker"], default="outer", help="internal")
        parser.add_argument("--executor", default="chaos-worker", help="internal")
        parser.add_argument("--datadir", default="", help="internal")

    def handle(self, *args: Any, **options: Any) -> None:
        role = options["role"]
        if role != "outer":
            try:
                chaos.require_scratch()
            except chaos.NotScratch as exc:
                raise CommandError(f"chaos --role {role}: {exc}", returncode=2) from None
        if role == "worker":
            chaos.work_forever(options["executor"])
        elif role == "inner":
            self.inner(options)
        else:
            self.outer(options)

    def outer(self, options: dict[str, Any]) -> None:
        """Own a scratch embedded server, run the orchestrator against it, stop it, relay the verdict."""
        from config import embedded

        if settings.PRODUCTION:
            raise CommandError("chaos refuses to run with DEPLOYMENT_ENV=production", returncode=1)
        limits = {"seconds": (1, 86_400), "workers": (1, 32), "requests": (2, 10_000), "settle_seconds": (0, 3_600)}
        for name, (low, high) in limits.items():
            value = options[name]
            if not low <= value <= high:  # also refuses nan and inf
                flag = "--" + name.replace("_", "-")
                raise CommandError(f"{flag} {shown(value)} is out of range ({low}-{high})", returncode=2)
        keep = Path(options["keep"]).resolve() if options["keep"] else None
        if keep is not None and keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
            raise CommandError(f"--keep {keep}: not a new or empty folder; name another", returncode=2)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
        with contextlib.nullcontext(str(keep)) if keep else tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
            datadir = Path(tmp) / "pg"
            socket_dir = embedded.ensure_running(datadir, cleanup_mode=None)
            url = f"postgresql://postgres@/postgres?host={socket_dir}"
            token = secrets.token_hex(16)
            chaos.mark_scratch(url, token)
            os.environ["CHAOS_SCRATCH_TOKEN"] = token  # handed to the inner role and its workers only
            # The demo application's receiver signs with a key made for this run (the inner role starts it).
            os.environ["RECEIVER_SIGNING_KEY"] = keys.b64(secrets.token_bytes(32))
            seed = options["seed"] if options["seed"] is not None else random.randrange(1_000_000)
            argv = [
                sys.executable, "manage.py", "chaos", "--role", "inner", "--datadir", str(datadir),
                "--seconds", str(options["seconds"]), "--workers", str(options["workers"]),
                "--requests", str(options["requests"]), "--seed", str(seed),
                "--settle-seconds", str(options["settle_seconds"]),
                *(["--db-restarts"] if options["db_restarts"] else []),
            ]  # fmt: skip
            try:
                proc = subprocess.run(
                    argv, env=chaos.worker_env(url), cwd=settings.BASE_DIR, text=True, capture_output=True
                )
                kept = self.keep_evidence(url, seed, argv, proc) if proc.returncode else None
            finally:
                embedded.stop(datadir)
        if keep is not None:  # before the run's own lines: the JSON line stays the last
            (keep / "output.txt").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
            for line in chaos.kept(keep):
                self.stdout.write(line)
        for line in proc.stderr.splitlines()[-60:]:
            self.stderr.write(line)
        lines = proc.stdout.strip().splitlines()
        for line in lines:
            self.stdout.write(line)
        if not lines:
            raise CommandError("the chaos run printed nothing", returncode=1)
        if proc.returncode:
            raise CommandError(f"chaos run failed (seed {seed}); evidence kept in {kept}", returncode=1)

    def keep_evidence(self, url: str, seed: int, argv: list[str], proc: subprocess.CompletedProcess[str]) -> Path:
        """A failing run keeps its scratch database (pg_dump), its seed and what it printed."""
        from config import embedded

        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        folder = Path(settings.BASE_DIR) / "chaos-failures" / f"{stamp}-seed-{seed}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "seed.txt").write_text(f"{seed}\n{' '.join(argv[1:])}\n")
        (folder / "output.txt").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
        dumped = subprocess.run(
            [str(embedded.bin_path() / "pg_dump"), "--dbname", url, "--file", str(folder / "scratch.sql")],
            capture_output=True,
            text=True,
        )
        if dumped.returncode:
            (folder / "pg_dump-error.txt").write_text(dumped.stderr)
        return folder

    def inner(self, options: dict[str, Any]) -> None:
        call_command("migrate", verbosity=0)
        inprocess.install()  # the demo application on the scratch server, its receiver installed
        seed = options["seed"]
        rng = random.Random(seed)
        orchestrator = chaos.Orchestrator(
            workers=options["workers"],
            database_url=os.environ["DATABASE_URL"],
            datadir=Path(options["datadir"]),
            rng=rng,
        )
        orchestrator.start_receiver()  # its own process, behind a network chaos cuts; registered for demo:
        try:
            chaos.seed(options["requests"])
            self.stdout.write(f"seed {seed}: {options['requests']} requests, {options['workers']} workers")
            started = time.monotonic()
            orchestrator.run(
                seconds=options["seconds"],
                db_restarts=options["db_restarts"],
                settle_seconds=options["settle_seconds"],
            )
        finally:
            orchestrator.stop_receiver()
        result = chaos.verdict(time.monotonic() - started, orchestrator.tally)
        tally = orchestrator.tally
        self.stdout.write(f"deletions by status {json.dumps(chaos.statuses())}")
        self.stdout.write(f"cancels {tally.cancels}, revokes {tally.revokes}, faults that failed {len(tally.faults)}")
        for fault in tally.faults[:5]:
            self.stdout.write(f"  {fault}")
        self.stdout.write(f"workers that ended by themselves (each replaced) {len(tally.worker_exits)}")
        for ended in tally.worker_exits[:5]:
            self.stdout.write(f"  {ended}")
        if chaos.failed(result):
            for request_id in result["offending_requests"]:
                for line in chaos.explain(request_id):
                    self.stdout.write(line)
        self.stdout.write(chaos.summary_line(result))
        if chaos.failed(result):
            raise CommandError(
                "duplicate effects, stale writes, lost requests, or no effect applied at all", returncode=1
            )
