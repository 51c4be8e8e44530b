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

import pgtrigger
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
    the case) and the backup beside them: the backup stays unless it becomes the person or may no
    longer hold the case, then the rota names another (None: nobody else may). Refused, naming
    the rule, when the move is not the actor's to make."""
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
    if backup_id is None or backup_id == new.pk or backup_id not in {u.pk for u in users}:
        backup_id = pick(members_of(users, load), keep=new.pk).backup  # never one who may not hold it
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
    cannot_act: str = "",
) -> list[Any]:
    """The custody actions of a case page (take, assign, hand over), each offered or disabled with
    its reason, the same rules `refusal` applies when they are posted. Pure. `cannot_act`: why `me`
    could not do what the case asks of its person (Take is then not offered: holding a case one
    cannot act on covers nobody)."""
    if rota_name is None:
        take_why = assign_why = hand_why = f"{why_nobody}: nobody is named until it waits on a person"
    else:
        assign_why = ""
        take_why = (
            "you hold this case"
            if person == me
            else ("" if on_rota else f"you are not on the {rota_name} rota, so you cannot hold this case")
        ) or cannot_act
        hand_why = "" if me in (person, backup) else "only the case's person or its backup hands it over"
    return [
        offer("take", "Take", perm=rota_perm, perms=perms, why_not=take_why),
        offer("assign", "Assign", perm=assign_perm, perms=perms, why_not=assign_why),
        offer("hand-over", "Hand over", perm=rota_perm, perms=perms, why_not=hand_why),
    ]


class NamesWhoMayAct(pgtrigger.Trigger):
    """The database's side of custody: whatever writes a case row, the people it names (`person`,
    `backup`) are active staff holding the permission of the rota they are named for, and never
    `barred` (a column: a deletion's submitter, whom four eyes keep off their own case). Each is
    checked when it is named (a later loss of permission shows as the rota naming again, never as a
    refused move of the case). With `key` (`status:rota`, a deletion's `assigned_for`) the rota is
    the one the key names, `rotas` its permission, and people are named only for the state the case
    is in; without, every naming is for `perm`'s rota (`rota`, its name), checked while the case is
    `open`."""

    when = pgtrigger.Before
    operation = pgtrigger.Insert | pgtrigger.Update

    def __init__(
        self,
        *,
        name: str,
        person: str,
        backup: str,
        perm: str = "",
        rotas: Mapping[str, str] | None = None,
        key: str = "",
        status: str = "status",
        barred: str = "",
        open: tuple[str, ...] = (),
        rota: str = "",
    ) -> None:
        self.person, self.backup, self.perm, self.rotas = person, backup, perm, dict(rotas or {})
        self.key, self.status, self.barred, self.open, self.rota = key, status, barred, open, rota
        super().__init__(name=name, declare=[("perm", "text"), ("rota", "text")])

    def get_func(self, model: Any) -> str:
        person, backup, key, status = self.person, self.backup, self.key, self.status

        def named(column: str) -> str:  # newly named: inserted, changed, or named for another state
            again = f" OR NEW.{key} IS DISTINCT FROM OLD.{key}" if key else ""
            return f"(TG_OP = 'INSERT' OR NEW.{column} IS DISTINCT FROM OLD.{column}{again})"

        lines = [f"IF NOT ({named(person)} OR {named(backup)}) THEN RETURN NEW; END IF;"]
        if self.open:
            lines.append(
                f"IF NEW.{status} NOT IN ({', '.join(_literal(s) for s in self.open)}) THEN RETURN NEW; END IF;"
            )
        lines.append(f"IF NEW.{person} IS NULL AND NEW.{backup} IS NULL THEN RETURN NEW; END IF;")
        if key:
            cases = " ".join(f"WHEN {_literal(r)} THEN {_literal(p)}" for r, p in sorted(self.rotas.items()))
            lines += [
                # A row copied in with the naming of an earlier state (a restore) names nobody now.
                f"IF TG_OP = 'INSERT' AND split_part(NEW.{key}, ':', 1) <> NEW.{status} THEN RETURN NEW; END IF;",
                f"IF split_part(NEW.{key}, ':', 1) <> NEW.{status} THEN RAISE EXCEPTION "
                "'custody: %: people are named only for the state the case is in (%, named for %)', "
                f"TG_TABLE_NAME, NEW.{status}, NEW.{key} USING ERRCODE = '23514'; END IF;",
                f"rota := substr(NEW.{key}, length(NEW.{status}) + 2);",
                f"perm := CASE rota {cases} END;",
                "IF perm IS NULL THEN RAISE EXCEPTION "
                "'custody: %: nobody is named while the % holds the case', TG_TABLE_NAME, rota "
                "USING ERRCODE = '23514'; END IF;",
            ]
        else:
            lines += [f"perm := {_literal(self.perm)};", f"rota := {_literal(self.rota or 'its')};"]
        if self.barred:
            lines.append(
                f"IF NEW.{self.barred} IS NOT NULL AND NEW.{self.barred} IN (NEW.{person}, NEW.{backup}) THEN "
                "RAISE EXCEPTION 'custody: %: its submitter never holds the case, as person or backup (four eyes)', "
                "TG_TABLE_NAME USING ERRCODE = '23514'; END IF;"
            )
        for column, what in ((person, "person"), (backup, "backup")):
            lines.append(
                f"IF NEW.{column} IS NOT NULL AND {named(column)} AND NOT {_may(f'NEW.{column}')} THEN "
                f"RAISE EXCEPTION 'custody: %: the {what} named (user %) may not act for the % rota: only "
                f"active staff holding %', TG_TABLE_NAME, NEW.{column}, rota, perm USING ERRCODE = '23514'; END IF;"
            )
        return " ".join([*lines, "RETURN NEW;"])


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _may(user: str) -> str:
    """`authority.may` over the user `user` and the permission in the trigger's variable `perm`."""
    sql, _ = authority.may_sql(user, "app.codename")
    return sql.replace("%s", "split_part(perm, '.', 1)", 1).replace("%s", "split_part(perm, '.', 2)", 1)
