"""Read and change the demo target system's data as an application would.

manage.py demo_target show demo:alice [--json]
manage.py demo_target add-rows demo:alice --community UUID --rows 5
manage.py demo_target set-agents demo:alice --community UUID --agents 0
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.core.management.base import CommandParser

from core.commands import ServiceCommand
from core.errors import BadInput, shown
from demo_target import system

MAX_ROWS = 10_000


def _community(raw: str) -> UUID:
    try:
        return UUID(raw)
    except ValueError:
        raise BadInput(f"--community {shown(raw)} is not a UUID") from None


def _count(raw: str, flag: str, low: int) -> int:
    try:
        n = int(raw)
    except ValueError:
        raise BadInput(f"{flag} {shown(raw)} is not a whole number") from None
    if not low <= n <= MAX_ROWS:
        raise BadInput(f"{flag} {n} is out of range ({low}-{MAX_ROWS:,})")
    return n


def _target(raw: str) -> str:
    if not raw.startswith("demo:") or len(raw) <= len("demo:") or not raw.isprintable():
        raise BadInput(f"target {shown(raw)} is refused: the demo target system holds demo: people only")
    return raw


class Command(ServiceCommand):
    help = "Read or change a demo person's data in the demo target system (its own database)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        show = sub.add_parser("show", help="per community: id, rows, agents, membership, data version")
        show.add_argument("target")
        show.add_argument("--json", action="store_true")
        add = sub.add_parser("add-rows", help="the person writes more rows in a community (joining it if needed)")
        add.add_argument("target")
        add.add_argument("--community", required=True)
        add.add_argument("--rows", required=True)
        agents = sub.add_parser("set-agents", help="the person's agents in a community become N")
        agents.add_argument("target")
        agents.add_argument("--community", required=True)
        agents.add_argument("--agents", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        target = _target(options["target"])
        if options["action"] == "add-rows":
            data = system.add_rows(target, _community(options["community"]), _count(options["rows"], "--rows", 1))
        elif options["action"] == "set-agents":
            community = _community(options["community"])
            agents = _count(options["agents"], "--agents", 0)
            if community not in {UUID(c["id"]) for c in system.show(target)["communities"]}:
                raise BadInput(f"{target} has no membership in community {community}")
            data = system.set_agents(target, community, agents)
        else:
            data = system.show(target)
        if options.get("json"):
            self.print_json(data)
            return
        self.stdout.write(f"{data['target']}: {'gated' if data['gated'] else 'not gated'}")
        for c in data["communities"]:
            self.stdout.write(
                f"  {c['id']}: {c['membership']}, {c['rows']} rows, {c['agents']} agents, version {c['version']}"
            )
