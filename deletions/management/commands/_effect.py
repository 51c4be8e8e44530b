"""What `record_effect` and `correct_effect` both take: the outcome of an effect applied by hand,
the evidence, and (purge_db applied) whether agents are left. Not a command (its name starts with _)."""

from typing import Any

from django.core.management.base import CommandParser

from deletions.contract import AGENTS_LEFT, agents_left


def add_outcome(parser: CommandParser, *, applied: str, not_applied: str, evidence: str) -> None:
    outcome = parser.add_mutually_exclusive_group(required=True)
    outcome.add_argument("--applied", action="store_true", help=applied)
    outcome.add_argument("--not-applied", action="store_true", help=not_applied)
    parser.add_argument("--evidence", required=True, help=evidence)
    parser.add_argument("--has-agents", choices=list(AGENTS_LEFT), help="purge_db applied: whether agents are left")


def outcome(options: dict[str, Any]) -> dict[str, Any]:
    """The service's `applied`, `evidence` and `has_agents`, from the parsed options."""
    return {
        "applied": options["applied"],
        "evidence": options["evidence"],
        "has_agents": agents_left(options["has_agents"]),
    }
