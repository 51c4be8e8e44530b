"""Retry policy for failed stages. Pure: a function of the failure count, the case and now."""

from __future__ import annotations

from datetime import datetime, timedelta

from core import backoff
from deletions.contract import GROUP_OWNERS, OPERATORS_ON_CALL, SYSTEM, FailurePlan, RetryDecision

FIRST_DELAY = timedelta(seconds=30)
MAX_DELAY = timedelta(hours=1)
MAX_CONSECUTIVE_FAILURES = 10
ATTENTION_CHECK = timedelta(hours=1)  # a person looks within the hour; overdue after


def retry_delay(failures: int) -> timedelta:
    """30 s after the first failure, doubling, capped at one hour."""
    return backoff.delay(failures, first=FIRST_DELAY, cap=MAX_DELAY)


def decide_retry(failures: int, now: datetime) -> RetryDecision:
    """After 10 consecutive failures the request waits for an operator."""
    if failures >= MAX_CONSECUTIVE_FAILURES:
        return RetryDecision(next_attempt_at=None, needs_attention=True)
    return RetryDecision(next_attempt_at=now + retry_delay(failures), needs_attention=False)


def person_or_on_call(owner: str) -> str:
    """A case that waits on a person keeps a named person (one who resumed it), else the group on call."""
    return owner if owner and owner not in GROUP_OWNERS else OPERATORS_ON_CALL


def plan_failure(
    *, failures: int, owner: str, stage: str, error: str, open_question: str, now: datetime
) -> FailurePlan:
    """What a failed attempt (the `failures`-th in a row) does to the case: retry later, with the
    system as owner, or (an unknown effect) with a person and an alarm; or, too many in a row,
    wait for an operator within the hour."""
    decision = decide_retry(failures, now)
    if decision.needs_attention:
        return FailurePlan(
            decision=decision,
            status="needs_attention",
            owner=person_or_on_call(owner),
            open_question=f"{stage} failed {failures} times in a row: {error}; resume or cancel",
            next_check_at=now + ATTENTION_CHECK,
            alarm=False,
        )
    return FailurePlan(
        decision=decision,
        status="retry_wait",
        owner=person_or_on_call(owner) if open_question else SYSTEM,
        open_question=open_question,
        next_check_at=decision.next_attempt_at,
        alarm=bool(open_question),
    )


def plan_handoff(
    *,
    request_id: object,
    target: str,
    where: str,
    stage: str,
    community_id: str | None,
    operation_id: object,
    now: datetime,
) -> FailurePlan:
    """An effect at a receiver that enforces nothing is handed to a person: the case waits for an
    operator (on call, within the hour, alarmed) to apply it by hand and record what they did."""
    place = f" in community {community_id}" if community_id else ""
    branch = " and whether agents are left (--has-agents yes|no)" if stage == "purge_db" else ""
    return FailurePlan(
        decision=RetryDecision(next_attempt_at=None, needs_attention=True),
        status="needs_attention",
        owner=OPERATORS_ON_CALL,
        open_question=(
            f"apply {stage}{place} for {target} by hand in {where} (operation {operation_id}), then record what "
            f"you did{branch}: 'Record effect applied by hand' on the case page, or manage.py record_effect "
            f"{request_id} --by YOU --applied|--not-applied --evidence TEXT"
        ),
        next_check_at=now + ATTENTION_CHECK,
        alarm=True,
    )
