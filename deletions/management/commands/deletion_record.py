from typing import Any

from core.commands import RecordCommand
from deletions import proof


class Command(RecordCommand):
    help = (
        "The signed proof of a deletion case (text or --json), refused while a stage's saved evidence is not what "
        "its receipt says; or --verify FILE: the back-office's signature and every receipt against the receiver's "
        "key the proof carries (exit 0 intact, 1 not)."
    )
    kind = "deletion"

    def build(self, request_id: str, now: Any) -> dict[str, Any]:
        return proof.of(request_id, now)

    def lines(self, sealed: dict[str, Any]) -> list[str]:
        return proof.lines(sealed)

    def contents(self, record: dict[str, Any]) -> str:
        return proof.receipts_fault(record)
