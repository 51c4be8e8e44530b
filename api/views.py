"""The JSON API under /api/v1/ for other systems (intake portals, ticketing): a face like the admin
and the commands. Each call parses, calls the one service the console calls (its permission check
included) and answers with the case as `show_deletion --json` / `show_retirement --json` give it.
The OpenAPI document is /api/v1/openapi.json, the interactive docs /api/v1/docs."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models import Q, QuerySet
from django.http import HttpRequest
from ninja import NinjaAPI, Query, Router, Schema, Status
from pydantic import ConfigDict

from api import errors, idempotency
from api.auth import Bearer, deciding, reading
from core import access, authority, clock
from core.errors import BadInput
from core.store import parse_id
from deletions import reading as deletion_reading
from deletions import services as deletions
from deletions.models import DeletionRequest
from deletions.models import Status as DeletionStatus
from retirements import selectors as retirement_selectors
from retirements import services as retirements
from retirements.models import RequestStatus, RetirementRequest

api = NinjaAPI(
    title="Deletion back-office API",
    version="1",
    description=(
        "Submit and follow user-data deletions and workspace retirements. Every call needs a personal token "
        "(`Authorization: Bearer <token>`, made in the admin under *Personal tokens*); a decision needs scope "
        '`decide` and the same permission as in the console. Errors are `{"error": {"code", "message", '
        '"field"}}`. A POST may carry an `Idempotency-Key` header: a repeat with the same body gets the first '
        "answer, a different body under the same key is refused (409)."
    ),
    urls_namespace="api-v1",
    auth=Bearer(),
)
errors.install(api)
deletions_router = Router(tags=["deletions"])
retirements_router = Router(tags=["retirements"])

MAX_PAGE = 100


class In(Schema):
    model_config = ConfigDict(extra="forbid", strict=True)


class Submission(In):
    target: str
    reason: str = ""
    received_at: datetime | None = None


class Approval(In):
    inventory_digest: str


class Reason(In):
    reason: str


class Resume(In):
    reason: str = ""
    effect_not_applied: bool = False


class RetirementRequestIn(In):
    workspace: str
    reason: str
    confirm: str


class Page(Schema):
    items: list[dict[str, Any]]
    next_cursor: str | None


class Listing(Schema):
    model_config = ConfigDict(extra="forbid")
    status: str | None = None
    limit: int = 50
    cursor: str | None = None


ERRORS = {400: dict, 401: dict, 403: dict, 404: dict, 409: dict, 413: dict, 429: dict}


def _deletion(request: HttpRequest, request_id: str | UUID) -> dict[str, Any]:
    holder = reading(request)
    authority.require(holder.actor, deletions.VIEW)
    return deletion_reading.case_view(request_id, lens=access.Lens.of(holder.actor.user), now=clock.now())


def _retirement(request: HttpRequest, request_id: str | UUID) -> dict[str, Any]:
    authority.require(reading(request).actor, retirements.VIEW)
    return retirement_selectors.describe(retirement_selectors.get(request_id))


def _cursor(raw: str | None) -> tuple[datetime, UUID] | None:
    """A page's position: the last row's creation time and id, opaque to the caller."""
    if not raw:
        return None
    try:
        when, _, rid = base64.urlsafe_b64decode(raw.encode() + b"==").decode().partition("|")
        return datetime.fromisoformat(when), UUID(rid)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise BadInput(f"cursor {raw[:40]!r} is not one this API gave", field="cursor") from None


def _page(
    request: HttpRequest, rows: QuerySet[Any], listing: Listing, *, statuses: list[str], when: str, view: Any
) -> dict[str, Any]:
    unknown = sorted(set(request.GET) - set(Listing.model_fields))
    if unknown:
        raise BadInput(
            f"unknown query parameter {unknown[0][:40]!r}: give status, limit or cursor", field=unknown[0][:40]
        )
    if listing.status is not None and listing.status not in statuses:
        raise BadInput(f"status {listing.status[:40]!r} is not one of {', '.join(statuses)}", field="status")
    if not 1 <= listing.limit <= MAX_PAGE:
        raise BadInput(f"limit is 1 to {MAX_PAGE}, not {listing.limit}", field="limit")
    if listing.status:
        rows = rows.filter(status=listing.status)
    after = _cursor(listing.cursor)
    if after:
        rows = rows.filter(Q(**{f"{when}__lt": after[0]}) | Q(**{when: after[0], "id__lt": after[1]}))
    found = list(rows.order_by(f"-{when}", "-id")[: listing.limit + 1])
    more = len(found) > listing.limit
    found = found[: listing.limit]
    last = found[-1] if more else None
    token = (
        base64.urlsafe_b64encode(f"{getattr(last, when).isoformat()}|{last.id}".encode()).decode().rstrip("=")
        if last
        else None
    )
    return {"items": [view(r) for r in found], "next_cursor": token}


# Deletions


@deletions_router.post("", response={201: dict, **ERRORS}, summary="Submit a deletion")
def submit_deletion(request: HttpRequest, payload: Submission) -> Status[dict[str, Any]]:
    holder = deciding(request)

    def produce() -> tuple[int, dict[str, Any]]:
        req = deletions.deletion_submit(
            actor=holder.actor, target=payload.target, reason=payload.reason, received_at=payload.received_at
        )
        return 201, _deletion(request, req.id)

    return Status(*idempotency.once(request, holder.actor.user, payload.model_dump(mode="json"), produce))


@deletions_router.get("", response={200: Page, **ERRORS}, summary="List deletions, newest first")
def list_deletions(request: HttpRequest, listing: Query[Listing]) -> dict[str, Any]:
    holder = reading(request)
    authority.require(holder.actor, deletions.VIEW)
    lens = access.Lens.of(holder.actor.user)

    def view(r: DeletionRequest) -> dict[str, Any]:
        return {
            "id": str(r.id),
            "status": r.status,
            "target": lens.target(r.target),
            "requested_by": r.requested_by,
            "created_at": r.created_at.isoformat(),
            "due_at": r.due_at.isoformat(),
            "next_check_at": r.next_check_at.isoformat() if r.next_check_at else None,
        }

    return _page(
        request,
        DeletionRequest.objects.all(),
        listing,
        statuses=list(DeletionStatus.values),
        when="created_at",
        view=view,
    )


@deletions_router.get("/{request_id}", response={200: dict, **ERRORS}, summary="Read one deletion")
def read_deletion(request: HttpRequest, request_id: str) -> dict[str, Any]:
    return _deletion(request, parse_id(request_id))


def _decision(
    router: Router,
    name: str,
    schema: type[In],
    decide: Callable[[Any, str, Any], Any],
    read: Callable[[HttpRequest, str], dict[str, Any]],
    summary: str,
) -> None:
    """`POST …/{request_id}/<name>`: the caller's token may decide, the one service decides
    (`decide(actor, request_id, payload)`), the answer is the case as it is now."""

    def view(request: HttpRequest, request_id: str, payload: Any) -> Status[dict[str, Any]]:
        holder = deciding(request)
        rid = str(parse_id(request_id))

        def produce() -> tuple[int, dict[str, Any]]:
            decide(holder.actor, rid, payload)
            return 200, read(request, rid)

        return Status(*idempotency.once(request, holder.actor.user, payload.model_dump(mode="json"), produce))

    view.__name__ = f"{name}_{'deletion' if router is deletions_router else 'retirement'}"
    view.__annotations__["payload"] = schema
    router.post(f"/{{request_id}}/{name}", response={200: dict, **ERRORS}, summary=summary)(view)


def _with_reason(decide: Callable[..., Any]) -> Callable[[Any, str, Any], Any]:
    return lambda actor, rid, payload: decide(actor=actor, request_id=rid, reason=payload.reason)


DELETION_DECISIONS: list[tuple[str, type[In], Callable[[Any, str, Any], Any], str]] = [
    (
        "approve",
        Approval,
        lambda actor, rid, p: deletions.deletion_approve(actor=actor, request_id=rid, digest=p.inventory_digest),
        "Approve its inventory (four eyes: never the submitter)",
    ),
    (
        "revoke",
        Reason,
        _with_reason(deletions.deletion_revoke_approval),
        "Revoke its approval",
    ),
    (
        "cancel",
        Reason,
        _with_reason(deletions.deletion_cancel),
        "Cancel it",
    ),
    (
        "resume",
        Resume,
        lambda actor, rid, p: deletions.deletion_resume(
            actor=actor, request_id=rid, reason=p.reason, effect_not_applied=p.effect_not_applied
        ),
        "Resume it (with effect_not_applied: confirm the target never applied the current stage)",
    ),
]
for _name, _schema, _decide, _summary in DELETION_DECISIONS:
    _decision(deletions_router, _name, _schema, _decide, _deletion, _summary)


# Retirements


@retirements_router.post("", response={201: dict, **ERRORS}, summary="Request a workspace's retirement")
def request_retirement(request: HttpRequest, payload: RetirementRequestIn) -> Status[dict[str, Any]]:
    holder = deciding(request)

    def produce() -> tuple[int, dict[str, Any]]:
        made = retirements.retirement_request(
            actor=holder.actor, slug=payload.workspace, reason=payload.reason, confirmation=payload.confirm
        )
        return 201, _retirement(request, made.id)

    return Status(*idempotency.once(request, holder.actor.user, payload.model_dump(mode="json"), produce))


@retirements_router.get("", response={200: Page, **ERRORS}, summary="List retirements, newest first")
def list_retirements(request: HttpRequest, listing: Query[Listing]) -> dict[str, Any]:
    authority.require(reading(request).actor, retirements.VIEW)

    def view(r: RetirementRequest) -> dict[str, Any]:
        return {
            "id": str(r.id),
            "status": r.status,
            "workspace": r.workspace.slug,
            "requested_at": r.requested_at.isoformat(),
            "eligible_at": r.eligible_at.isoformat() if r.eligible_at else None,
        }

    return _page(
        request,
        RetirementRequest.objects.select_related("workspace"),
        listing,
        statuses=list(RequestStatus.values),
        when="requested_at",
        view=view,
    )


@retirements_router.get("/{request_id}", response={200: dict, **ERRORS}, summary="Read one retirement")
def read_retirement(request: HttpRequest, request_id: str) -> dict[str, Any]:
    return _retirement(request, parse_id(request_id))


RETIREMENT_DECISIONS: dict[str, Callable[..., Any]] = {
    "hold": retirements.retirement_hold,
    "release": retirements.retirement_release,
    "cancel": retirements.retirement_cancel,
    "resume": retirements.retirement_resume,
}
for _name, _service in RETIREMENT_DECISIONS.items():
    _decision(retirements_router, _name, Reason, _with_reason(_service), _retirement, f"{_name.capitalize()} it")

api.add_router("/deletions", deletions_router)
api.add_router("/retirements", retirements_router)
