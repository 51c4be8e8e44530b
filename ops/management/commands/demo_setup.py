import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from deletions import targets
from ops import demo


class Command(BaseCommand):
    help = "Create (or reset) the demo staff logins, print them, and seed demo cases once. Development only."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-data", action="store_true", help="only the logins, no demo cases")
        parser.add_argument(
            "--keep-password", action="store_true", help="leave existing logins' passwords as they are (scripts)"
        )
        parser.add_argument("--receiver", help="register the demo application's receiver at this URL")
        parser.add_argument("--receiver-key", help="its key, KEY_ID=PUBLIC_KEY, as `python -m receiver key` prints it")

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.PRODUCTION:
            raise CommandError("demo_setup refuses to run with DEPLOYMENT_ENV=production", returncode=1)
        if options["receiver"]:
            kid, key = targets.parse_key(options["receiver_key"] or "")
            try:
                targets.register(
                    name="demo target system", prefix="demo:", base_url=options["receiver"], keys={kid: key}
                )
            except ValidationError as exc:
                raise CommandError(f"the demo receiver is refused: {'; '.join(exc.messages)}", returncode=2) from None
            self.stdout.write(
                f"Demo target system: demo: people are deleted through the receiver at {options['receiver']}"
            )
        if not options["no_data"] and not targets.registered():
            raise CommandError(
                "no receiver is registered for demo: people: give --receiver URL --receiver-key KEY_ID=KEY "
                "(`make run` starts the receiver and does this)",
                returncode=2,
            )
        username = os.environ.get("DEMO_USERNAME", "demo")
        password = os.environ.get("DEMO_PASSWORD") or secrets.token_urlsafe(12)
        user, created = get_user_model().objects.get_or_create(username=username)
        user.is_staff = True
        user.is_superuser = True
        user.email = user.email or f"{username}@localhost"
        reset = created or not options["keep_password"]
        if reset:
            user.set_password(password)
        user.save()
        others = demo.ensure_users(password, reset=reset)
        demo.ensure_intake_account()
        folder = Path(os.environ.get("DEMO_TOKEN_DIR", settings.BASE_DIR / ".demo-tokens"))
        people = [username, *(name for name, _ in demo.DEMO_USERS), demo.INTAKE_ACCOUNT[0]]
        new = demo.ensure_tokens(people, folder)
        if reset:
            self.stdout.write(f"Demo staff login: username={username} password={password}")
        else:
            self.stdout.write(f"Demo staff login: username={username} (password unchanged)")
        if others:
            self.stdout.write(f"Password {password} for: {', '.join(others)}")
            self.stdout.write(
                f"{username} sees everything but is on no rota, so its 'Waiting for me' is empty: "
                "log in as approver-1 or operator-1 to see a rota's work"
            )
        where = folder.relative_to(settings.BASE_DIR) if folder.is_relative_to(settings.BASE_DIR) else folder
        self.stdout.write(
            f"Personal tokens in {where}/ (command line: --token-file {where}/USER; API: "
            f'-H "Authorization: Bearer $(cat {where}/USER)")' + (f"; new for {', '.join(new)}" if new else "")
        )
        if not options["no_data"]:
            shown = demo.seed(user)
            if shown:
                self.stdout.write("Demo cases created, each in a state that lasts (search the target in the admin):")
                for line in shown:
                    self.stdout.write(f"  {line}")
