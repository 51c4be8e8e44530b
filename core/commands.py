"""Thin command base: parse, call one service, report; refusals become exit codes."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError


class ServiceCommand(BaseCommand):
    def execute(self, *args: Any, **options: Any) -> str | None:
        try:
            return super().execute(*args, **options)
        except DomainError as exc:
            raise CommandError(exc.message, returncode=exc.exit_code) from exc

    def print_json(self, data: Any) -> None:
        self.stdout.write(json.dumps(data, indent=2, default=str))
