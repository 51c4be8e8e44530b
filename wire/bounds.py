"""How long a receiver may take over one call, and how long the back-office waits for its answer: one
rule, so the receiver answers "nothing changed, retry" (409, its transaction rolled back at its own
bound) before the back-office gives up and the effect is left unknown.

- A receiver bounds each call's work in its database: an effect's transaction as a whole, and every
  other statement, by `RECEIVER_STATEMENT_TIMEOUT_MS` (default `STATEMENT_TIMEOUT_MS`), and a wait for
  a lock by `RECEIVER_LOCK_TIMEOUT_MS` (default `LOCK_TIMEOUT_MS`); it states its bound in its health
  answer (`statement_timeout_ms`).
- The back-office waits for an answer `read_timeout_seconds` (a registered receiver's, default
  `READ_TIMEOUT_SECONDS`): at least the receiver's bound plus `MARGIN_SECONDS` (the call's way there
  and back, a wait for one of the receiver's threads, the evidence signed). Its health check
  (`receivers`) names a receiver whose stated bound leaves less (`too_short`), and registration refuses it.
- One effect changes at most `RECEIVER_MAX_ROWS` rows (default `MAX_ROWS`): a person with more in one
  place is refused at submission with the counts, so anything admitted completes within the bound.
"""

from __future__ import annotations

STATEMENT_TIMEOUT_MS = 20_000
LOCK_TIMEOUT_MS = 5_000
MARGIN_SECONDS = 10
READ_TIMEOUT_SECONDS = STATEMENT_TIMEOUT_MS / 1000 + MARGIN_SECONDS  # 30 s
# The most rows one effect may change: a quarter of what the measured rate applies within the bound,
# so a slower or busier machine still finishes in time. Measured with the sample forum (a fifth posts
# anonymized, three fifths comments and a fifth attachments deleted; one person's rows in one community)
# through the receiver as its own process, on a 2-core machine other work was loading: the effect's
# stage, as the back-office times it, applied 72,000 to 136,000 rows a second (500,000 rows: 3.7 to
# 6.9 s; 80,015 rows: 0.8 s; `pytest -s tests/receiver/test_large_person.py` prints it). Rows of a
# partitioned table apply once per row, far slower (`receiver.dataset.compile._triggers`).
RATE = 100_000
MAX_ROWS = RATE * STATEMENT_TIMEOUT_MS // 1000 // 4


def too_short(read_timeout_seconds: float, statement_timeout_ms: int) -> str:
    """Why a back-office's read timeout for a receiver is too short for the bound it states ("" when it
    is not): the receiver would still be working, and answer "nothing changed, retry", after the
    back-office gave up on it (the effect left unknown, looked up, sent again: never done)."""
    least = statement_timeout_ms / 1000 + MARGIN_SECONDS
    if read_timeout_seconds >= least:
        return ""
    return (
        f"its read timeout ({read_timeout_seconds:g} s) is shorter than the receiver's bound on a call "
        f"({statement_timeout_ms / 1000:g} s, RECEIVER_STATEMENT_TIMEOUT_MS) plus {MARGIN_SECONDS} s: raise the "
        f"read timeout to {least:g} s or more, or lower the receiver's bound"
    )
