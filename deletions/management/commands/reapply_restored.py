"""manage.py reapply_restored [PREFIX]

After a receiver's database was restored from a backup: every completed effect it no longer knows is
applied again under the original approval's authority, or handed to a person where that no longer
allows it (`deletions.reapply`). The dispatcher does the same at each tick; running it again re-applies
nothing twice. Exit 1 when something is left for the next pass (a receiver that does not answer)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from core import clock
from core.commands import ServiceCommand
from deletions import reapply


class Command(ServiceCommand):
    help = "Re-apply the completed deletions a restored receiver no longer knows (all receivers, or one)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("prefix", nargs="?", help="the receiver's prefix, e.g. forum: (all when left out)")

    def handle(self, *args: Any, **options: Any) -> None:
        now = clock.now()
        if options["prefix"]:
            passes = [reapply.reapply_restored(reapply.registration(options["prefix"]), now=now)]
        else:
            passes = reapply.reapply_all(now)
        for done in passes:
            self.stdout.write(done.said())
        left = [p for p in passes if p.unsettled]
        if left:
            raise CommandError(f"left for the next pass: {'; '.join(p.receiver for p in left)}", returncode=1)
