from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandParser

from core import tokens
from core.commands import ServiceCommand
from core.errors import NotFound, shown


class Command(ServiceCommand):
    help = (
        "Issue a personal token for USERNAME and print it once (only its digest is kept). Run by an operator "
        "with shell access, who holds the database credentials anyway; staff make their own in the admin."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", required=True, help="what the token is for")
        parser.add_argument("--scope", choices=tokens.SCOPES, default=tokens.READ)
        parser.add_argument("--days", type=int, default=None, help="how long it lasts (default TOKEN_DAYS)")

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None or not user.is_active:
            raise NotFound(f"no active user {shown(options['username'])}")
        self.stdout.write(tokens.issue(user, name=options["name"], scope=options["scope"], days=options["days"]))
