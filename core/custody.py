"""Custody: the named person and backup of a case, picked from a rota, and the rules of taking,
assigning and handing one over. Both workflows call these; each writes its own table.

A rota is a group of people who answer one kind of question (approvers, operators on call). Its
members are the usernames `CUSTODY_ROTAS` lists for it, else the active staff members of the
Django group it names, in username order; only those holding the rota's permission now count.
The person is the least loaded member (fewest open cases of this workflow held as person), ties
broken by username; the backup is the next one in the same order. A pass counts each case it names,
so a run of new cases goes round the rota.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model

from core import authority
from core.errors import Refused, shown
from core.present import offer

TAKE, ASSIGN, HAND_OVER = "take", "assign", "hand over"
HOW = (TAKE, ASSIGN, HAND_OVER)


@dataclass(frozen=True)
class Member:
    id: int
    username: str
    load: int = 0  # open cases of this workflow they hold now


@dataclass(frozen=True)
class Pick:
    person: int | None
    backup: int | None


def pick(members: Iterable[Member], *, exclude: Iterable[int] = (), keep: int | None = None) -> Pick:
    """Person and backup from a rota. Pure. `exclude`: never these (the submitter of an approval);
    `keep`: this member stays the person (taken or assigned by hand) and only a backup is picked."""
    barred = set(exclude)
    order = sorted(
        (m for m in members if m.id not in barred),
        key=lambda m: (m.load, m.username),
    )
    if keep is not None:
        backup = next((m.id for m in order if m.id != keep), None)
        return Pick(keep, backup)
    ids = [m.id for m in order]
    return Pick(ids[0] if ids else None, ids[1] if len(ids) > 1 else None)


def rota(name: str, perm: str) -> list[Any]:
    """The users of rota `name` who hold `perm` now, in username order."""
    user = get_user_model()
    conf: Mapping[str, Any] = settings.CUSTODY_ROTAS.get(name, {})
    people = list(conf.get("people") or [])
    users = user.objects.filter(is_active=True, is_staff=True)
    users = users.filter(username__in=people) if people else users.filter(groups__name=conf.get("group", name))
    return [u for u in users.order_by("username").distinct() if authority.may(u, perm)]


def refusal(
    how: str,
    *,
    actor_id: int,
    actor_may_assign: bool,
    person_id: int | None,
    backup_id: int | None,
    new_person_id: int,
) -> str:
    """Why `how` is refused, or "". Pure. Take: the actor becomes the person (any rota member).
    Assign: a lead holding the assign permission names anyone on the rota. Hand over: the person
    or the backup gives the case to someone else on the rota (no extra permission)."""
    if how not in HOW:
        return f"{shown(how)} is not a custody move: take, assign or hand over"
    if how == TAKE and new_person_id != actor_id:
        return "take is for yourself: to give a case to someone else, assign it or hand it over"
    if how == ASSIGN and not actor_may_assign:
        return "assigning a case to someone else needs the permission to assign cases"
    if how == HAND_OVER and actor_id not in (person_id, backup_id):
        return "only the case's person or its backup hands it over; a lead assigns it"
    if new_person_id == person_id:
        return "that person already holds this case"
    return ""


def choose(members: list[Any], username: str, *, what: str) -> Any:
    """The rota member named `username`, or a refusal naming who may be chosen."""
    for m in members:
        if m.get_username() == username:
            return m
    names = ", ".join(m.get_username() for m in members) or "nobody"
    raise Refused(f"{username} is not on the {what} rota (or lacks its permission); on it now: {names}")


def members_of(users: Iterable[Any], load: Mapping[int, int]) -> list[Member]:
    return [Member(u.pk, u.get_username(), load.get(u.pk, 0)) for u in users]


def by_hand(
    how: str,
    *,
    rota_name: str,
    actor: Any,
    users: list[Any],
    load: Mapping[int, int],
    person_id: int | None,
    backup_id: int | None,
    named: str,
    may_assign: bool,
) -> tuple[Any, Pick]:
    """The person a take, assign or hand over names (from `users`, the rota members who may hold
    the case) and the backup beside them: the backup stays unless it becomes the person, then the
    rota names another. Refused, naming the rule, when the move is not the actor's to make."""
    if how not in HOW:
        raise Refused(f"{shown(how)} is not a custody move: take, assign or hand over")
    new = choose(users, actor.get_username() if how == TAKE else named, what=rota_name)
    why = refusal(
        how,
        actor_id=actor.pk,
        actor_may_assign=may_assign,
        person_id=person_id,
        backup_id=backup_id,
        new_person_id=new.pk,
    )
    if why:
        raise Refused(why)
    if backup_id is None or backup_id == new.pk:
        backup_id = pick(members_of(users, load), keep=new.pk).backup
    return new, Pick(new.pk, backup_id)


def offers(
    *,
    rota_name: str | None,
    why_nobody: str,
    person: str | None,
    backup: str | None,
    me: str,
    on_rota: bool,
    perms: set[str],
    rota_perm: str,
    assign_perm: str,
) -> list[Any]:
    """The custody actions of a case page (take, assign, hand over), each offered or disabled with
    its reason, the same rules `refusal` applies when they are posted. Pure."""
    if rota_name is None:
        take_why = assign_why = hand_why = f"{why_nobody}: nobody is named until it waits on a person"
    else:
        assign_why = ""
        take_why = (
            "you hold this case"
            if person == me
            else ("" if on_rota else f"you are not on the {rota_name} rota, so you cannot hold this case")
        )
        hand_why = "" if me in (person, backup) else "only the case's person or its backup hands it over"
    return [
        offer("take", "Take", perm=rota_perm, perms=perms, why_not=take_why),
        offer("assign", "Assign", perm=assign_perm, perms=perms, why_not=assign_why),
        offer("hand-over", "Hand over", perm=rota_perm, perms=perms, why_not=hand_why),
    ]
