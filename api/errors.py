"""The API's one error shape, `{"error": {"code", "message", "field"}}`, for every refusal: the
domain's (bad input 400, unknown 404, not allowed 403, refused by the case's state 409) and the
framework's (unreadable or invalid body 400, no token 401), never a traceback."""

from __future__ import annotations

import json
import logging
from typing import Any

import ninja.parser
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from core.errors import BadInput, DomainError, NotAllowed, NotFound, Refused

logger = logging.getLogger("api")


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, *, field: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field, self.headers = status, code, message, field, headers or {}


class Parser(ninja.parser.Parser):
    """JSON bodies as ninja reads them, refusing text that is not Unicode: JSON may escape a lone
    surrogate (`"\\ud800"`), which no pattern can name and no database column can hold."""

    def parse_body(self, request: HttpRequest) -> Any:
        data = super().parse_body(request)
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError(400, "bad_json", "the body holds a lone surrogate: text that is not Unicode") from None
        return data


# Each pattern the OpenAPI document declares, in the words a refusal of it says (api/views.py).
PATTERN_WORDS: dict[str, str] = {}


def body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "field": field}}


def _domain(exc: DomainError) -> tuple[int, str]:
    if isinstance(exc, BadInput):
        return 400, "bad_input"
    if isinstance(exc, NotFound):
        return 404, "not_found"
    if isinstance(exc, NotAllowed):
        return 403, "not_allowed"
    if isinstance(exc, Refused):
        return 409, "refused"
    return 400, "refused"


def _field(loc: Any) -> str | None:
    parts = [str(p) for p in loc or () if p not in ("body", "payload", "query", "path", "header")]
    return ".".join(parts) or None


def install(api: NinjaAPI) -> None:
    def respond(request: HttpRequest, status: int, data: dict[str, Any], headers: dict[str, str]) -> HttpResponse:
        response = api.create_response(request, data, status=status)
        for name, value in headers.items():
            response[name] = value
        return response

    @api.exception_handler(ApiError)
    def api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
        return respond(request, exc.status, body(exc.code, exc.message, exc.field), exc.headers)

    @api.exception_handler(DomainError)
    def domain_error(request: HttpRequest, exc: DomainError) -> HttpResponse:
        status, code = _domain(exc)
        return respond(request, status, body(code, exc.message, exc.field), {})

    @api.exception_handler(ValidationError)
    def invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        first = exc.errors[0] if exc.errors else {}
        field = _field(first.get("loc"))
        message = str(first.get("msg", "invalid input"))
        if first.get("type") == "extra_forbidden":
            message = "unknown field: this call takes no such field"
        elif first.get("type") == "string_pattern_mismatch":  # the rule in words, not the pattern
            message = f"refused: {PATTERN_WORDS.get(str((first.get('ctx') or {}).get('pattern')), 'not in its form')}"
        return respond(request, 400, body("invalid", f"{field}: {message}" if field else message, field), {})

    @api.exception_handler(AuthenticationError)
    def unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        return respond(request, 401, body("unauthenticated", "give your personal token as a Bearer token"), {})

    @api.exception_handler(HttpError)
    def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        code = "bad_json" if exc.status_code == 400 else "http_error"
        message = "the body is not a JSON object" if code == "bad_json" else str(exc)
        return respond(request, exc.status_code, body(code, message), {})

    @api.exception_handler(Exception)
    def unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
        logger.exception("api: unexpected error", extra={"path": request.path})
        return respond(request, 500, body("internal", "something went wrong on our side; nothing more is known"), {})
