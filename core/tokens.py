"""Personal tokens: who is acting, proven, for the API and the command line.

A token is `bo_` and 43 random characters, shown once when it is issued; the database keeps its
SHA-256 digest (a token is random, so a slow hash would add nothing), its owner, a name, a scope
and an expiry. `use` takes a token as a face receives it and returns the acting person, or a
one-line refusal; each use sets the token's last use. Scope `read` looks at cases; `decide` may
also take the decisions the person's permissions allow. Whoever holds the database credentials can
still do anything: the token stops one person acting through the product as another.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from core import clock
from core.authority import Actor
from core.errors import BadInput, DomainError, plain_text, shown
from core.sql import Statements

SQL = Statements.beside(__file__, "tokens.sql")
PREFIX = "bo_"
READ, DECIDE = "read", "decide"
SCOPES = (READ, DECIDE)
MAX_DAYS = 366


class Unauthenticated(DomainError):
    """No token, or one that proves nobody (unknown, revoked, expired, its person inactive)."""


@dataclass(frozen=True)
class Holder:
    token_id: int
    actor: Actor
    scope: str
    name: str

    def may_decide(self) -> bool:
        return self.scope == DECIDE


def digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def issue(user: Any, *, name: str, scope: str = READ, days: int | None = None, now: datetime | None = None) -> str:
    """A new token for `user`; the only time the token itself exists outside its holder."""
    name = plain_text(name, "the token name", max_chars=100)
    if scope not in SCOPES:
        raise BadInput(f"scope {shown(scope)} is refused: give read or decide")
    days = settings.TOKEN_DAYS if days is None else days
    if not 1 <= days <= MAX_DAYS:
        raise BadInput(f"a token lasts 1 to {MAX_DAYS} days, not {days}")
    now = now or clock.now()
    raw = PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic(), connection.cursor() as cur:
        SQL.one(
            cur,
            "issue",
            user=user.pk,
            label=name,
            scope=scope,
            prefix=raw[:10],
            digest=digest(raw),
            now=now,
            expires=now + timedelta(days=days),
        )
    return raw


def use(raw: str | None, *, now: datetime | None = None) -> Holder:
    """The person a token proves, its last use set; `Unauthenticated` naming why not."""
    raw = (raw or "").strip()
    if not raw:
        raise Unauthenticated("no token: give your personal token")
    if not raw.startswith(PREFIX) or len(raw) > 200 or not raw.isprintable():
        raise Unauthenticated("the token is not a back-office token")
    now = now or clock.now()
    with connection.cursor() as cur:
        row = SQL.one(cur, "use", digest=digest(raw), now=now)
    if row is None:
        raise Unauthenticated(_why_not(raw, now))
    token_id, user_id, scope, name = row
    return Holder(token_id=token_id, actor=Actor.of(get_user_model().objects.get(pk=user_id)), scope=scope, name=name)


def _why_not(raw: str, now: datetime) -> str:
    from core.models import ApiToken

    token = ApiToken.objects.filter(digest=digest(raw)).select_related("user").first()
    if token is None:
        return "the token is unknown"
    if token.revoked_at is not None:
        return f"the token {token.prefix}… was revoked"
    if token.expires_at <= now:
        return f"the token {token.prefix}… expired"
    return f"the token {token.prefix}… belongs to an inactive user"


def revoke(token_id: int, *, now: datetime | None = None) -> bool:
    """Revoke a token once; False when it was already revoked."""
    with connection.cursor() as cur:
        return SQL.one(cur, "revoke", id=token_id, now=now or clock.now()) is not None
