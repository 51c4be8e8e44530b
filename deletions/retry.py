"""Retry policy for failed stages. Pure: a function of the failure count and now."""

from __future__ import annotations

from datetime import datetime, timedelta

from core import backoff
from deletions.store.types import RetryDecision

FIRST_DELAY = timedelta(seconds=30)
MAX_DELAY = timedelta(hours=1)
MAX_CONSECUTIVE_FAILURES = 10


def retry_delay(failures: int) -> timedelta:
    """30 s after the first failure, doubling, capped at one hour."""
    return backoff.delay(failures, first=FIRST_DELAY, cap=MAX_DELAY)


def decide_retry(failures: int, now: datetime) -> RetryDecision:
    """After 10 consecutive failures the request waits for an operator."""
    if failures >= MAX_CONSECUTIVE_FAILURES:
        return RetryDecision(next_attempt_at=None, needs_attention=True)
    return RetryDecision(next_attempt_at=now + retry_delay(failures), needs_attention=False)
