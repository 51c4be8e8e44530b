from typing import Any

from core.commands import ServiceCommand
from ops import notify


class Command(ServiceCommand):
    help = (
        "Tell people what waits for them: name people from the rotas, record each occurrence once per "
        "person, make the daily digests and send whatever is due. Prints the counts as JSON."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        self.print_json(notify.tick())
