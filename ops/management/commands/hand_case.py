from typing import Any

from django.core.management.base import CommandParser

from core.commands import ServiceCommand, acting, add_token_argument
from core.errors import BadInput
from deletions.services import deletion_custody
from retirements.services import retirement_custody


class Command(ServiceCommand):
    help = (
        "Take a case (for yourself), assign it (a lead, to anyone on its rota) or hand it over (its person or "
        "backup): a decision with a reason. Prints who holds it and the backup as JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("case_id")
        parser.add_argument("--kind", required=True, choices=("deletion", "retirement"))
        parser.add_argument("--take", action="store_true", help="take it yourself (--by)")
        parser.add_argument("--assign", metavar="USER", help="name USER its person (needs the assign permission)")
        parser.add_argument("--hand-over", metavar="USER", help="give it to USER (you are its person or backup)")
        parser.add_argument("--by", required=True, metavar="USER")
        add_token_argument(parser)
        parser.add_argument("--reason", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        chosen = [("take", ""), ("assign", options["assign"]), ("hand over", options["hand_over"])]
        moves = [(how, who) for how, who in chosen if (options["take"] if how == "take" else who)]
        if len(moves) != 1:
            raise BadInput("say one of --take, --assign USER or --hand-over USER")
        how, person = moves[0]
        move = deletion_custody if options["kind"] == "deletion" else retirement_custody
        case: Any = move(
            actor=acting(options, "--by"),
            request_id=options["case_id"],
            how=how,
            person=person or "",
            reason=options["reason"],
        )
        person_field = case.assignee if options["kind"] == "deletion" else case.owner
        self.print_json(
            {
                "id": str(case.pk),
                "responsible": person_field.get_username() if person_field else None,
                "backup": case.backup.get_username() if case.backup else None,
            }
        )
