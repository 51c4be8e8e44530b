"""`Idempotency-Key` on a POST, as Stripe has it: the first answer under a key is kept; a repeat
with the same body gets it again, a different body under the same key is refused (409). Two
requests at once with one key: the second waits for the first (the key's row is inserted in the
same transaction as the decision) and then gets its answer. A refused first request keeps no key,
so it can be sent again."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction
from django.http import HttpRequest

from api.errors import ApiError
from api.models import IdempotencyKey
from core import clock
from core.errors import BadInput, plain_text, shown
from core.sql import Statements

SQL = Statements.beside(__file__, "store.sql")
HEADER = "Idempotency-Key"


def fingerprint(request: HttpRequest, payload: dict[str, Any]) -> str:
    text = json.dumps([request.method, request.path, payload], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def once(
    request: HttpRequest, user: Any, payload: dict[str, Any], produce: Callable[[], tuple[int, dict[str, Any]]]
) -> tuple[int, dict[str, Any]]:
    raw = request.headers.get(HEADER)
    if raw is None:
        return produce()
    try:
        key = plain_text(raw, HEADER, max_chars=255)
    except BadInput as exc:
        raise ApiError(400, "bad_input", exc.message, field=HEADER) from None
    mark = fingerprint(request, payload)
    with transaction.atomic():
        with connection.cursor() as cur:
            row = SQL.one(cur, "claim_key", user=user.pk, key=key, fingerprint=mark, now=clock.now())
        if row is None:
            first = IdempotencyKey.objects.get(user=user, key=key)
            if first.fingerprint != mark:
                raise ApiError(
                    409,
                    "idempotency_key_reused",
                    f"{HEADER} {shown(key)} was used for a different request; use a new key for a new request",
                    field=HEADER,
                )
            return int(first.status_code or 200), first.response or {}
        status, data = produce()
        with connection.cursor() as cur:
            SQL.one(cur, "answer_key", id=row[0], status=status, response=json.dumps(data, default=str))
        return status, data
