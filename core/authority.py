"""Who acts, and whether they may: the one permission check both workflows call.

Every actor is a Django user. Every service takes an `Actor` and checks the
action's named permission itself, so the admin, the commands and any future API
get the same checks; the receiving boundaries check the same rule again where
the effect lands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection

from core import present
from core.errors import BadInput, NotAllowed, Refused, shown


@dataclass(frozen=True)
class Actor:
    name: str
    user: Any  # a Django user

    @classmethod
    def of(cls, user: Any) -> Actor:
        return cls(name=user.get_username(), user=user)


def named(name: str, flag: str = "--by") -> Actor:
    """The user a command line names. Usernames match whatever their case: `Operator-A` is
    operator-a, so four eyes cannot be passed by typing a name differently."""
    name = (name or "").strip()
    if not name or len(name) > 150 or not name.isprintable():
        raise BadInput(f"{flag} {shown(name)} is refused: give a username of 1-150 printable characters")
    matches = list(get_user_model().objects.filter(username__iexact=name)[:2])
    exact = [u for u in matches if u.get_username() == name]
    if exact:
        return Actor.of(exact[0])
    if len(matches) != 1:
        raise Refused(f"{flag} {shown(name)}: " + ("no such user" if not matches else "several users match that name"))
    return Actor.of(matches[0])


def may(user: Any, perm: str) -> bool:
    """The rule every check uses: an active staff user holding `perm` (read fresh by the caller)."""
    return bool(user is not None and user.is_active and user.is_staff and user.has_perm(perm))


def holds_now(user_id: int | None, perm: str) -> bool:
    """An active user holding `perm` (a superuser, or directly, or through a group), read now in
    one statement: Django's `is_active and has_perm(perm)` without loading every permission."""
    sql, params = may_sql("%s", perm, staff=False)
    with connection.cursor() as cur:
        cur.execute(f"SELECT {sql}", [*params, user_id])
        return bool(cur.fetchone()[0])


def may_sql(user_id: str, perm: str, *, staff: bool = True) -> tuple[str, list[Any]]:
    """`may` as one SQL boolean over the user whose id is the column `user_id`, for the
    receiving boundaries to read with their lock in a single statement. Same rule as Django's
    ModelBackend behind `may`: active staff, and a superuser or holding `perm` directly or
    through a group (tests hold the two to the same answers)."""
    from django.contrib.auth.models import Group, Permission

    user: Any = get_user_model()
    app_label, codename = perm.split(".", 1)
    direct = user.user_permissions.through._meta.db_table
    member = user.groups.through._meta.db_table
    granted = Group.permissions.through._meta.db_table
    staff_rule = "u.is_staff AND " if staff else ""
    sql = f"""COALESCE((SELECT u.is_active AND {staff_rule}(u.is_superuser OR EXISTS (
        SELECT 1 FROM {Permission._meta.db_table} p JOIN django_content_type ct ON ct.id = p.content_type_id
        WHERE ct.app_label = %s AND p.codename = %s AND (
            EXISTS (SELECT 1 FROM {direct} d WHERE d.user_id = u.id AND d.permission_id = p.id)
            OR EXISTS (SELECT 1 FROM {member} m JOIN {granted} g ON g.group_id = m.group_id
                       WHERE m.user_id = u.id AND g.permission_id = p.id))))
        FROM {user._meta.db_table} u WHERE u.id = {user_id}), false)"""
    return sql, [app_label, codename]


def require(actor: Actor, perm: str) -> Any:
    """The acting user, when it may `perm`; otherwise a refusal naming the rule."""
    if not may(actor.user, perm):
        raise NotAllowed(
            f"{actor.name} is not allowed to {present.permission_words(perm)} (only active staff holding {perm})"
        )
    return actor.user


def same_person(a: Any, b: Any) -> bool:
    return a is not None and b is not None and a.pk == b.pk
