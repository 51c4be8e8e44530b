"""The command base: parse, call one service, report; refusals become exit codes.

`DecisionCommand` is the shape of every staff-decision command in both workflows:
a request id, an actor flag naming who decides, maybe `--reason`, one service
call, the result as JSON.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any, ClassVar

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core import authority, tokens
from core.authority import Actor
from core.errors import BadInput, DomainError, Refused, shown

REASON_REQUIRED, REASON_OPTIONAL, NO_REASON = "required", "optional", "none"


def _cut(message: str, limit: int = 300) -> str:
    """argparse quotes a rejected value whole; a refusal stays one short line."""
    message = " ".join(message.split())
    return message if len(message) <= limit else f"{message[:limit]}… ({len(message)} characters)"


def parse_time(text: str, flag: str) -> datetime:
    """An ISO date or time from a command line (UTC when it names no zone), or a one-line refusal."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(f"{flag} {shown(text)} is refused: give an ISO date or time, e.g. 2027-03-01T09:30") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


TOKEN_ENV = "BACKOFFICE_TOKEN"
TOKEN_HELP = f"a file holding your personal token (default: the {TOKEN_ENV} environment variable)"


def add_token_argument(parser: CommandParser) -> None:
    parser.add_argument("--token-file", metavar="FILE", help=TOKEN_HELP)


def acting(options: dict[str, Any], flag: str, *, decides: bool = True) -> Actor:
    """The person an actor flag names, proven by their personal token (`--token-file`, else
    BACKOFFICE_TOKEN): a command acts only as whoever holds the token, and a decision needs a token
    of scope `decide`. Refused (exit 1, nothing written) otherwise."""
    actor = authority.named(options[flag.lstrip("-").replace("-", "_")], flag=flag)
    if options.get("token_file"):
        try:
            with open(options["token_file"], encoding="utf-8") as f:
                raw = f.read(500)
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"--token-file {shown(options['token_file'])} cannot be read ({exc})") from None
    else:
        raw = os.environ.get(TOKEN_ENV, "")
    try:
        holder = tokens.use(raw)
    except tokens.Unauthenticated as exc:
        raise Refused(f"{flag} {actor.name} is refused: {exc.message} ({TOKEN_ENV} or --token-file)") from None
    if not authority.same_person(holder.actor.user, actor.user):
        raise Refused(
            f"{flag} {actor.name} is refused: the token is {holder.actor.name}'s, and a command acts only as "
            "the person whose token it holds"
        )
    if decides and not holder.may_decide():
        raise Refused(f"{flag} {actor.name} is refused: the token {holder.name!r} may only read (scope read)")
    return holder.actor


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
        add_token_argument(parser)
        if self.reason != NO_REASON:
            parser.add_argument("--reason", required=self.reason == REASON_REQUIRED, default="")
        self.add_options(parser)

    def add_options(self, parser: CommandParser) -> None:
        """Flags of this decision beyond the id, the actor and the reason."""

    def handle(self, *args: Any, **options: Any) -> None:
        actor = acting(options, self.actor_flag)
        extra = {"reason": options["reason"]} if self.reason != NO_REASON else {}
        self.print_json(self.decide(actor=actor, request_id=options["request_id"], options=options, **extra))

    def decide(self, *, actor: Actor, request_id: str, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """Call the one service and return what to print."""
        raise NotImplementedError


class RecordCommand(ServiceCommand):
    """A case's signed proof (`core.proofs`): printed as text or JSON for a reader whose role may
    read proofs (`core.access`), or a saved proof verified (exit 0 intact, 1 not)."""

    kind: ClassVar[str] = "case"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("request_id", nargs="?")
        parser.add_argument("--by", metavar="USER", help="who reads it (their role must allow proofs)")
        parser.add_argument("--json", action="store_true", help="print the proof as JSON (what --verify reads)")
        parser.add_argument("--verify", metavar="FILE", help="check a saved JSON proof instead")
        add_token_argument(parser)

    def build(self, request_id: str, now: Any) -> dict[str, Any]:
        raise NotImplementedError

    def lines(self, proof: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def contents(self, record: dict[str, Any]) -> str:
        """Why what a saved proof's record carries does not hold, or "" (`core.proofs.verify`'s `contents`)."""
        return ""

    def handle(self, *args: Any, **options: Any) -> None:
        from core import access, clock, proofs

        if options["verify"]:
            try:
                with open(options["verify"], "rb") as f:
                    data = f.read()
            except OSError as exc:
                raise CommandError(f"{options['verify']}: cannot be read ({exc.strerror})", returncode=1) from None
            why = proofs.verify_file(data, self.contents)
            if why:
                raise CommandError(f"{options['verify']}: NOT intact: {why}", returncode=1)
            proof = json.loads(data)
            self.stdout.write(
                f"{options['verify']}: intact; {proof['record']['kind']} {proof['record']['id']}, {proof['digest']}"
            )
            return
        if not options["request_id"] or not options["by"]:
            raise CommandError(f"give a {self.kind} id and --by USER (or --verify FILE)", returncode=2)
        reader = acting(options, "--by", decides=False)
        if not access.sees(access.roles_of(reader.user), access.PROOF):
            raise CommandError(
                f"{reader.name} may not read proofs (only approvers, auditors and superusers)", returncode=1
            )
        proof = self.build(options["request_id"], clock.now())
        if options["json"]:
            self.stdout.write(proofs.dumps(proof), ending="")
            return
        for line in self.lines(proof):
            self.stdout.write(line)
