"""The shape every staff-decision command shares: ID, --by USER, maybe --reason; one service; JSON."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django.core.management.base import CommandParser

from core.commands import ServiceCommand
from retirements.inspect import describe, get
from retirements.services import user_named

REASON_REQUIRED, REASON_OPTIONAL, NO_REASON = "required", "optional", "none"


class DecisionCommand(ServiceCommand):
    service: ClassVar[Callable[..., Any]]
    reason: ClassVar[str] = REASON_REQUIRED
    shows: ClassVar[tuple[str, ...]] = ("id", "status")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("request_id")
        parser.add_argument("--by", required=True, metavar="USER")
        if self.reason != NO_REASON:
            parser.add_argument("--reason", required=self.reason == REASON_REQUIRED, default="")

    def handle(self, *args: Any, **options: Any) -> None:
        request = get(options["request_id"])
        extra = {"reason": options["reason"]} if self.reason != NO_REASON else {}
        type(self).service(actor=user_named(options["by"]), request_id=request.id, **extra)
        data = describe(get(request.id))
        self.print_json({k: data[k] for k in self.shows})
