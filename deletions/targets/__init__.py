"""The systems that receive deletion effects, one adapter each (`base.Adapter`).

`for_target(target)` picks the adapter by the target's prefix: a registered target system
(`models.TargetSystem`, in the admin: a receiver reached over HTTP, `http.py`), or `manual:`, a
system a person deletes in by hand, review-only (`manual.py`). A new target system is a row, not code.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models.signals import post_delete, post_save

from core import present
from core.errors import shown
from deletions.errors import Refused
from deletions.models import TargetSystem
from deletions.store import receivers
from deletions.targets import manual
from deletions.targets.base import Adapter, TargetUnreachable
from deletions.targets.http import HttpTarget, Registration, State, discover, reach, rewound, trusted
from wire import bounds

MANUAL: Adapter = manual.ManualTarget()


def registered() -> list[Registration]:
    return [
        Registration(
            name=s.name,
            prefix=s.prefix,
            base_url=s.base_url,
            keys=dict(s.keys),
            connect_timeout=s.connect_timeout_seconds,
            read_timeout=s.read_timeout_seconds,
            unanswered_since=s.unanswered_since,
            unanswered_reason=s.unanswered_reason,
            state=State(s.state_incarnation, s.state_applied) if s.state_incarnation else None,
        )
        for s in TargetSystem.objects.all()
    ]


def checked(*, name: str, prefix: str, base_url: str, keys: dict[str, str]) -> TargetSystem:
    """The registration under this prefix, new or updated, checked (`TargetSystem.clean`) and not saved;
    else ValidationError."""
    system = TargetSystem.objects.filter(prefix=prefix).first() or TargetSystem(prefix=prefix)
    system.name, system.base_url, system.keys = name, base_url, keys
    system.full_clean()
    return system


def register(*, name: str, prefix: str, base_url: str, keys: dict[str, str]) -> TargetSystem:
    """Register a receiver (or update the one under this prefix): its URL and its public keys by id.
    A key that saved evidence cites is never rewritten or retired (the database refuses it, in words)."""
    system = checked(name=name, prefix=prefix, base_url=base_url, keys=keys)
    try:
        with transaction.atomic():
            system.save()
    except IntegrityError as exc:
        raise ValidationError(refusal(exc)) from None
    return system


def refusal(exc: Exception) -> str:
    """The database's refusal of a change to a registration, in its one line (the table's name off)."""
    return str(exc).splitlines()[0].removeprefix("registered_receivers: ")


def parse_key(text: str) -> tuple[str, str]:
    """`KEY_ID=PUBLIC_KEY`, as `python -m receiver key` prints it (checked by `TargetSystem.clean`)."""
    kid, _, key = text.partition("=")
    return kid.strip(), key.strip()


def register_answering(
    *, name: str, prefix: str, base_url: str, keys: dict[str, str], wait_seconds: float = 15.0
) -> TargetSystem:
    """Register a receiver that answers at its URL (waited for up to `wait_seconds`) and signs, now,
    with one of the keys given; else ValidationError saying which (nothing registered). The registration
    is checked before the receiver is reached."""
    system = checked(name=name, prefix=prefix, base_url=base_url, keys=keys)
    deadline = time.monotonic() + wait_seconds
    with httpx.Client(timeout=2.0, verify=trusted()) as client:
        while True:
            try:
                declared = discover(client, base_url, name)
                break
            except TargetUnreachable as exc:
                if time.monotonic() > deadline:
                    raise ValidationError(f"no receiver answers at {base_url}: {exc.message}") from None
                time.sleep(0.2)
        stated = _stated_bound(client, base_url)
    if keys.get(declared.key_id) is None or declared.keys.get(declared.key_id) != keys[declared.key_id]:
        raise ValidationError(
            f"the receiver at {base_url} signs with key {declared.key_id!r}, which no key given matches "
            "(read it on the receiver's machine: python -m receiver key)"
        )
    if stated is not None and (why := bounds.too_short(system.read_timeout_seconds, stated)):
        raise ValidationError(f"the receiver at {base_url} is not registered: {why}")
    return register(name=name, prefix=prefix, base_url=base_url, keys=keys)


def _stated_bound(client: httpx.Client, base_url: str) -> int | None:
    """The bound on a call a receiver's health states (`wire.bounds`), or None when it states none or its
    health does not answer now (the health check reads it again: `http.waits_too_little`)."""
    try:
        said = client.get(base_url + "health").json()
    except (httpx.HTTPError, ValueError):
        return None
    stated = said.get("statement_timeout_ms") if isinstance(said, dict) else None
    return stated if isinstance(stated, int) and not isinstance(stated, bool) else None


# A run's registrations (URL, keys, timeouts) are read at most every REGISTRATIONS_SECONDS per process, not
# once a run; a change saved through the model (`register`, the admin) clears them here at once, other
# processes see it within that time, and evidence under a key id a run does not hold re-reads them first
# (`HttpTarget`: a key registered since). So a key is rotated by registering the new one first.
REGISTRATIONS_SECONDS = 30.0
_cached: list[tuple[float, list[Registration]]] = []
_cache_lock = threading.Lock()


def _registrations(*, fresh: bool = False) -> list[Registration]:
    with _cache_lock:
        if not fresh and _cached and time.monotonic() - _cached[0][0] < REGISTRATIONS_SECONDS:
            return _cached[0][1]
    systems = registered()
    with _cache_lock:
        _cached[:] = [(time.monotonic(), systems)]
    return systems


def forget_registrations(**_: Any) -> None:
    """Registrations are read again at the next run (a registration saved or deleted)."""
    with _cache_lock:
        _cached.clear()


post_save.connect(forget_registrations, sender=TargetSystem, dispatch_uid="targets.forget_registrations.save")
post_delete.connect(forget_registrations, sender=TargetSystem, dispatch_uid="targets.forget_registrations.delete")


def for_target(target: str) -> Adapter:
    if target.startswith(manual.PREFIX):
        return MANUAL
    for fresh in (False, True):  # one registered since the last read is found
        systems = _registrations(fresh=fresh)
        for r in systems:
            if target.startswith(r.prefix):
                return HttpTarget(r, reread=functools.partial(_reread, r.prefix))
    known = ", ".join([*(r.prefix for r in systems), manual.PREFIX])
    raise Refused(f"no target system takes {shown(target)} (known: {known})")  # (registered now: state, not shape)


def _reread(prefix: str) -> Registration | None:
    return next((r for r in _registrations(fresh=True) if r.prefix == prefix), None)


def keys_in(target: str, systems: list[Registration]) -> dict[str, str] | None:
    """The public keys (by key id) a stage of `target` is believed under: its receiver's, as
    registered (`for_target`'s choice); None for a manual target, whose stages carry no receipt;
    none at all for a target no receiver is registered for any more (no receipt verifies)."""
    if target.startswith(manual.PREFIX):
        return None
    return next((dict(r.keys) for r in systems if target.startswith(r.prefix)), {})


def keys_for(target: str) -> dict[str, str] | None:
    """`keys_in` over the registrations now (one read)."""
    return keys_in(target, registered())


def silent_since(r: Registration) -> str:
    """A receiver noted as not answering, in words ("" when it answers): "<name> at <url> did not
    answer since <time>" (what it failed with is health's to say)."""
    if r.unanswered_since is None:
        return ""
    return f"{r.where()} did not answer since {present.absolute(r.unanswered_since)}"


def silence(target: str) -> str:
    """The receiver of `target` noted as not answering, in words ("" when it answers, or is no
    receiver): what a live case's page says first."""
    for r in registered():
        if target.startswith(r.prefix):
            return silent_since(r)
    return ""


def silences() -> Callable[[str], str]:
    """`silence` for the rows of a list, from one read of the registrations."""
    systems = registered()
    return lambda target: next((silent_since(r) for r in systems if target.startswith(r.prefix)), "")


def unanswered(adapter: Adapter, reason: str, *, now: datetime) -> str:
    """Note that a receiver did not answer (a worker could not read its fence): the words the case
    page, the overview and health say, with since when ("" for a target that is no receiver)."""
    if not isinstance(adapter, HttpTarget):
        return ""
    since = receivers.unanswered(prefix=adapter.r.prefix, reason=reason, now=now)
    forget_registrations()  # written by a statement, not the model: the next run reads it again
    if since is None:  # unregistered since it was read
        return ""
    return silent_since(dataclasses.replace(adapter.r, unanswered_since=since, unanswered_reason=reason))


def answered(adapter: Adapter) -> None:
    """The receiver answered: a note that it did not is cleared (only when there is one)."""
    if isinstance(adapter, HttpTarget) and adapter.r.unanswered_since is not None:
        receivers.answered(prefix=adapter.r.prefix)
        forget_registrations()


@dataclass(frozen=True)
class Reach:
    """Whether one registered receiver answers now, under a key registered for it."""

    name: str
    url: str
    ok: bool
    since: datetime | None  # since when it has not answered, when known
    detail: str


def reachability(now: datetime) -> list[Reach]:
    """Each registered receiver: does it answer discovery now, signing under a key registered for it, and
    does its health report at least what the back-office holds signed evidence of, and a bound on a call
    its read timeout is above (`http.rewound`)?
    Each is asked at most every `http.REACH_SECONDS` per process, with short timeouts; a change is
    noted (`store.receivers`), so since when it has not answered is known across processes."""
    out = []
    for r in registered():
        why = reach(r)
        since = r.unanswered_since
        if why:
            if since is None or why != r.unanswered_reason:  # written only when it changes
                since = receivers.unanswered(prefix=r.prefix, reason=why, now=now)
            when = f" (not answering as registered since {present.absolute(since)})" if since else ""
            out.append(Reach(r.name, r.base_url, False, since, f"{why}{when}"))
        else:
            if since is not None:
                receivers.answered(prefix=r.prefix)
            back = rewound(r)  # it answers: does its database still hold what we hold evidence of?
            out.append(Reach(r.name, r.base_url, not back, None, back or f"{r.where()} answers"))
    return out
