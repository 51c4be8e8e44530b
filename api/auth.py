"""Who calls the API: a personal token as `Authorization: Bearer <token>` (`core.tokens`), counted
against the token's calls per minute; refusals in the API's one error shape (`api.errors`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest
from ninja.security import HttpBearer

from api.errors import ApiError
from core import clock, tokens
from core.errors import NotAllowed
from core.sql import Statements

SQL = Statements.beside(__file__, "store.sql")


class Bearer(HttpBearer):
    def __call__(self, request: HttpRequest) -> Any:
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer "):
            raise ApiError(401, "unauthenticated", "give your personal token as 'Authorization: Bearer <token>'")
        return self.authenticate(request, header[len("Bearer ") :])

    def authenticate(self, request: HttpRequest, token: str) -> tokens.Holder:
        try:
            holder = tokens.use(token)
        except tokens.Unauthenticated as exc:
            raise ApiError(401, "unauthenticated", exc.message) from None
        now = clock.now()
        minute = now.replace(second=0, microsecond=0)
        with connection.cursor() as cur:
            row = SQL.one(cur, "count_call", token=holder.token_id, minute=minute)
            if row and row[0] == 1:
                SQL.run(cur, "forget_windows", token=holder.token_id, minute=minute)
        limit = settings.API_RATE_PER_MINUTE
        if row and row[0] > limit:
            wait = 60 - now.second
            raise ApiError(
                429,
                "rate_limited",
                f"the token {holder.name!r} made more than {limit} calls this minute; try again in {wait} s",
                headers={"Retry-After": str(wait)},
            )
        size = int(request.META.get("CONTENT_LENGTH") or 0)
        if size > settings.API_MAX_BODY_BYTES:
            raise ApiError(413, "too_large", f"the body is {size} bytes; at most {settings.API_MAX_BODY_BYTES}")
        request.holder = holder  # type: ignore[attr-defined]
        return holder


def deciding(request: HttpRequest) -> tokens.Holder:
    """The caller, whose token may decide (scope decide): a read token is refused."""
    holder: tokens.Holder = request.auth  # type: ignore[attr-defined]
    if not holder.may_decide():
        raise NotAllowed(f"the token {holder.name!r} may only read (scope read); a decision needs scope decide")
    return holder


def reading(request: HttpRequest) -> tokens.Holder:
    holder: tokens.Holder = request.auth  # type: ignore[attr-defined]
    return holder
