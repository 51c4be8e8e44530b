"""Whether each registered receiver answers (`registered_receivers.unanswered_since`): noted by the
worker that could not read a receiver's fence and by health's discovery, cleared when it answers. The
case page, the overview and health say "<receiver> at <url> did not answer since <time>" from it.

And what its database has applied as far as the back-office holds signed evidence (`state_incarnation`,
`state_applied`): noted where evidence is saved (`stages.sql` `save_result`), rebased once a
re-application after a restore has answered every operation the receiver no longer knew (`deletions.reapply`)."""

from __future__ import annotations

from datetime import datetime

from django.db import connection

from core.sql import Statements

SQL = Statements.beside(__file__, "receivers.sql")
MAX_REASON = 500


def unanswered(*, prefix: str, reason: str, now: datetime) -> datetime | None:
    """Note that the receiver registered under `prefix` did not answer: since when it has not (the first
    time noted, kept until it answers), or None when no receiver is registered under it."""
    with connection.cursor() as cur:  # one statement: its own transaction
        row = SQL.one(cur, "unanswered", prefix=prefix, reason=reason[:MAX_REASON], now=now)
    return row[0] if row else None


def answered(*, prefix: str) -> None:
    """The receiver answered again."""
    with connection.cursor() as cur:
        SQL.run(cur, "answered", prefix=prefix)


def rebased(*, prefix: str, held: tuple[str, int], now_reported: tuple[str, int]) -> bool:
    """What the receiver reports now becomes what is held, if what is held is still `held`; whether it did."""
    with connection.cursor() as cur:
        row = SQL.one(
            cur,
            "rebased",
            prefix=prefix,
            held_incarnation=held[0],
            held_applied=held[1],
            incarnation=now_reported[0][:64],
            applied=now_reported[1],
        )
    return row is not None
