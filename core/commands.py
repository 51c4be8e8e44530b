"""The command base: parse, call one service, report; refusals become exit codes.

`DecisionCommand` is the shape of every staff-decision command in both workflows:
a request id, an actor flag naming who decides, maybe `--reason`, one service
call, the result as JSON.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core import authority
from core.authority import Actor
from core.errors import DomainError

REASON_REQUIRED, REASON_OPTIONAL, NO_REASON = "required", "optional", "none"


def _cut(message: str, limit: int = 300) -> str:
    """argparse quotes a rejected value whole; a refusal stays one short line."""
    message = " ".join(message.split())
    return message if len(message) <= limit else f"{message[:limit]}… ({len(message)} characters)"


class ServiceCommand(BaseCommand):
    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        refuse = parser.error
        parser.error = lambda message: refuse(_cut(message))  # type: ignore[method-assign]
        return parser

    def execute(self, *args: Any, **options: Any) -> str | None:
        try:
            return super().execute(*args, **options)
        except DomainError as exc:
            raise CommandError(exc.message, returncode=exc.exit_code) from exc

    def print_json(self, data: Any) -> None:
        self.stdout.write(json.dumps(data, indent=2, default=str))


class DecisionCommand(ServiceCommand):
    actor_flag: ClassVar[str] = "--by"
    reason: ClassVar[str] = REASON_REQUIRED

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("request_id")
        parser.add_argument(self.actor_flag, required=True, metavar="USER")
        if self.reason != NO_REASON:
            parser.add_argument("--reason", required=self.reason == REASON_REQUIRED, default="")
        self.add_options(parser)

    def add_options(self, parser: CommandParser) -> None:
        """Flags of this decision beyond the id, the actor and the reason."""

    def handle(self, *args: Any, **options: Any) -> None:
        flag = self.actor_flag.lstrip("-")
        actor = authority.named(options[flag.replace("-", "_")], flag=f"--{flag}")
        extra = {"reason": options["reason"]} if self.reason != NO_REASON else {}
        self.print_json(self.decide(actor=actor, request_id=options["request_id"], options=options, **extra))

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """Call the one service and return what to print."""
        raise NotImplementedError
