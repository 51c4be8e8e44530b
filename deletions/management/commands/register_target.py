"""manage.py register_target --name NAME --prefix PREFIX: --url URL --key KEY_ID=PUBLIC_KEY [--key ...]

Register a receiver as a target system (or update the one under this prefix), as the admin's
Target systems page does: targets starting with the prefix are deleted there, and its evidence is
believed only when signed by one of its keys. Give every key whose evidence you keep (a rotation
adds the new key and keeps the old). The receiver must answer at the URL (waited for up to
`--wait` seconds) and sign, now, with one of the keys given."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from deletions import targets


class Command(BaseCommand):
    help = "Register a receiver (an HTTP target system) under its prefix, with its public keys."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--prefix", required=True, help="e.g. forum:")
        parser.add_argument("--url", required=True, help="its base URL, ending with /receiver/v1/")
        parser.add_argument(
            "--key", action="append", required=True, help="KEY_ID=PUBLIC_KEY, as `python -m receiver key` prints"
        )
        parser.add_argument("--wait", type=float, default=15.0, help="seconds to wait for it to answer (15)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            system = targets.register_answering(
                name=options["name"],
                prefix=options["prefix"],
                base_url=options["url"],
                keys=dict(targets.parse_key(k) for k in options["key"]),
                wait_seconds=max(0.0, min(options["wait"], 600.0)),
            )
        except ValidationError as exc:
            raise CommandError(f"refused: {'; '.join(exc.messages)}", returncode=2) from None
        self.stdout.write(f"{system.prefix} targets are deleted through {system.name} at {system.base_url}")
