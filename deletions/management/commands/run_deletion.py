import os
import signal
import socket
import threading
from typing import Any

from django.core.management.base import CommandError, CommandParser

from core.commands import ServiceCommand
from deletions import worker
from deletions.selectors import parse_request_id
from deletions.services import run_options, valid_executor


class Command(ServiceCommand):
    help = "Run an approved deletion: one stage with --next-step, otherwise to the end (budget 100 handler calls)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("request_id")
        parser.add_argument("--next-step", action="store_true", help="run one handler and its transition, then stop")
        parser.add_argument("--executor-id", default=f"{socket.gethostname()}:{os.getpid()}")
        parser.add_argument("--fail-stage", default=None, metavar="STAGE")
        parser.add_argument("--stage-delay-ms", default="0", help="0-3600000 (demo: a wait inside each stage)")

    def handle(self, *args: Any, **options: Any) -> None:
        rid = parse_request_id(options["request_id"])
        executor = valid_executor(options["executor_id"])
        opts = run_options(
            request_id=rid,
            fail_stage=options["fail_stage"],
            stage_delay_ms=options["stage_delay_ms"],
        )
        stop = threading.Event()
        previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            outcome = worker.run(rid, executor_id=executor, next_step=options["next_step"], options=opts, stop=stop)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if outcome.exit_code:
            raise CommandError(outcome.message, returncode=outcome.exit_code)
        self.stdout.write(outcome.message)
