from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from core import grants, proofs


class Command(BaseCommand):
    help = (
        "Print the back-office's public key and nothing else (for $(...)): by default the grant key's public "
        "half, what every receiver sets as RECEIVER_BACKOFFICE_KEY (from DELETION_GRANT_SIGNING_KEY); --proof "
        "the proof key's (from PROOF_SIGNING_KEY, or PROOF_PUBLIC_KEY), what a proof names."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--proof", action="store_true", help="the proof key's public half instead")

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(proofs.public_key() if options["proof"] else grants.public_key())
