from typing import Any

from django.core.management.base import CommandParser

from core.commands import ServiceCommand
from deletions.users.service import deletion_submit, submission_json


class Command(ServiceCommand):
    help = "Submit a demo user-deletion request; prints it as JSON (id, status, inventory, inventory_digest)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--target", required=True, help="demo:NAME")
        parser.add_argument("--requested-by", required=True, help="operator submitting the request")

    def handle(self, *args: Any, **options: Any) -> None:
        req = deletion_submit(target=options["target"], requested_by=options["requested_by"])
        self.print_json(submission_json(req))
