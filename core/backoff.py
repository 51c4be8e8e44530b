"""Exponential backoff, the one rule both workflows retry by. Pure."""

from __future__ import annotations

from datetime import timedelta


def delay(attempt: int, *, first: timedelta, cap: timedelta) -> timedelta:
    """`first` after the first attempt, doubling each time, never more than `cap`."""
    if attempt < 1:
        raise ValueError("attempts count from 1")
    return min(first * (2 ** min(attempt - 1, 30)), cap)
