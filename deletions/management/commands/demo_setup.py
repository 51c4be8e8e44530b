import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create (or reset) the demo staff login and print it. Development only."

    def handle(self, *args: Any, **options: Any) -> None:
        from django.conf import settings

        if settings.PRODUCTION:
            self.stderr.write("demo_setup refuses to run with DEPLOYMENT_ENV=production")
            raise SystemExit(1)
        username = os.environ.get("DEMO_USERNAME", "demo")
        password = os.environ.get("DEMO_PASSWORD") or secrets.token_urlsafe(12)
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.is_staff = True
        user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write(f"Demo staff login: username={username} password={password}")
