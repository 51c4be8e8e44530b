"""Who acts, and whether they may: the one permission check both workflows call.

Every service takes an `Actor` and checks the action's named permission itself,
so the admin, the commands and any future API get the same checks. An actor is a
staff user; the one exception, until the deletion command lines name accounts, is
a bare operator name typed on a deletion command line (`Actor.user` is None).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model

from core.errors import BadInput, NotFound, Refused


@dataclass(frozen=True)
class Actor:
    name: str
    user: Any = None  # a Django user, or None for a bare name

    @classmethod
    def of(cls, user: Any) -> Actor:
        return cls(name=user.get_username(), user=user)


def named(name: str, flag: str = "by") -> Actor:
    """The actor a command line names: the account with that username, or a bare name."""
    name = (name or "").strip()
    if not name or len(name) > 150 or not name.isprintable():
        raise BadInput(f"{flag} {name!r} is refused: give an operator name of 1-150 printable characters")
    return Actor(name=name, user=get_user_model().objects.filter(username=name).first())


def require(actor: Actor, perm: str) -> Any:
    """The acting user, when it is active staff holding `perm`; otherwise a refusal naming the rule."""
    user = actor.user
    if user is None:
        raise NotFound(f"no user named {actor.name!r}")
    if not (user.is_active and user.is_staff and user.has_perm(perm)):
        raise Refused(f"{actor.name} lacks permission {perm} (active staff only)")
    return user


def require_if_account(actor: Actor, perm: str) -> None:
    """Deletion services: a named account is checked like any other; a bare command-line
    name is recorded as given (the seed's walkthrough names operators as free text)."""
    if actor.user is not None:
        require(actor, perm)
