"""manage.py register_target --name NAME --prefix PREFIX: --url URL --key KEY_ID=PUBLIC_KEY [--key ...]

Register a receiver as a target system (or update the one under this prefix), as the admin's
Target systems page does: targets starting with the prefix are deleted there, and its evidence is
believed only when signed by one of its keys. Give every key whose evidence you keep (a rotation
adds the new key and keeps the old). The receiver must answer at the URL (waited for up to 15 s)
and declare, as the key it signs with now, one of the keys given."""

from __future__ import annotations

import time
from typing import Any

import httpx
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

    def handle(self, *args: Any, **options: Any) -> None:
        keys = dict(k.partition("=")[::2] for k in options["key"])
        key_id, declared = _declared(options["url"])
        if declared.get(key_id) is None or declared.get(key_id) != keys.get(key_id):
            raise CommandError(
                f"refused: the receiver at {options['url']} signs with key {key_id!r}, which no --key gives "
                "(read it on the receiver's machine: python -m receiver key)",
                returncode=2,
            )
        try:
            system = targets.register(
                name=options["name"], prefix=options["prefix"], base_url=options["url"], keys=keys
            )
        except ValidationError as exc:
            raise CommandError(f"refused: {'; '.join(exc.messages)}", returncode=2) from None
        self.stdout.write(f"{system.prefix} targets are deleted through {system.name} at {system.base_url}")


def _declared(url: str, seconds: float = 15.0) -> tuple[str, dict[str, str]]:
    """The key id a receiver signs with now and the keys it declares (`GET /receiver/v1/`), waiting
    up to `seconds` for it to answer."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            answer = httpx.get(url, timeout=2.0).json()
        except (httpx.HTTPError, ValueError) as exc:
            if time.monotonic() > deadline:
                raise CommandError(
                    f"refused: no receiver answers at {url} ({type(exc).__name__})", returncode=2
                ) from None
            time.sleep(0.2)
            continue
        if not isinstance(answer, dict) or not isinstance(answer.get("keys"), dict):
            raise CommandError(f"refused: {url} does not answer as a receiver (no keys declared)", returncode=2)
        return str(answer.get("key_id", "")), {str(k): str(v) for k, v in answer["keys"].items()}
