"""The JSON API under /api/v1/ for other systems (intake portals, ticketing): a face like the admin
and the commands. Each call parses, calls the one service the console calls (its permission check
included) and answers with the case as `show_deletion --json` / `show_retirement --json` give it.
The OpenAPI document is /api/v1/openapi.json, the interactive docs /api/v1/docs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any
from uuid import UUID

from django.db.models import Q, QuerySet
from django.http import HttpRequest
from ninja import NinjaAPI, Query, Router, Schema, Status
from pydantic import AwareDatetime, ConfigDict, Field

from api import errors, idempotency
from api.auth import Bearer, deciding, reading
from core import access, authority, clock
from core.errors import MAX_REASON_CHARS, OPTIONAL_REASON_PATTERN, REASON_PATTERN, BadInput
from deletions import reading as deletion_reading
from deletions import services as deletions
from deletions.models import DeletionRequest
from deletions.models import Status as DeletionStatus
from deletions.rules.inventory import TARGET_PATTERN
from deletions.services import DIGEST_PATTERN
from retirements import selectors as retirement_selectors
from retirements import services as retirements
from retirements.models import RequestStatus, RetirementRequest
from retirements.services import MAX_SLUG_CHARS, SLUG_PATTERN

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
    parser=errors.Parser(),
)
errors.install(api)
deletions_router = Router(tags=["deletions"])
retirements_router = Router(tags=["retirements"])

MAX_PAGE = 100


class In(Schema):
    # Patterns in Python's own syntax: the one the services check and the document declares.
    model_config = ConfigDict(extra="forbid", strict=True, regex_engine="python-re")


# What the services accept, declared in the OpenAPI document (pydantic refuses anything else with
# a 400 naming the field, before a service is called). Each pattern is the service's own constant.
ReasonText = Annotated[str, Field(max_length=MAX_REASON_CHARS, pattern=REASON_PATTERN)]
OptionalReason = Annotated[str, Field(max_length=MAX_REASON_CHARS, pattern=OPTIONAL_REASON_PATTERN)]


errors.PATTERN_WORDS.update(
    {
        TARGET_PATTERN: "a target system's prefix (like demo: or manual:), then 1-200 printable ASCII characters "
        "without surrounding spaces",
        REASON_PATTERN: "some text, without control or invisible characters (line breaks are fine)",
        OPTIONAL_REASON_PATTERN: "no control or invisible characters (line breaks are fine)",
        DIGEST_PATTERN: "64 hexadecimal characters, the inventory digest the case shows",
        SLUG_PATTERN: "a workspace slug: lowercase letters and digits, a single - or _ between them",
    }
)


class Submission(In):
    target: str = Field(pattern=TARGET_PATTERN, examples=["demo:alice"])
    reason: OptionalReason = ""
    received_at: AwareDatetime | None = Field(None, strict=False, description="when the intake received it")


class Approval(In):
    inventory_digest: str = Field(pattern=DIGEST_PATTERN, description="the inventory's SHA-256, as the case shows it")


class Reason(In):
    reason: ReasonText


class Resume(In):
    reason: OptionalReason = ""
    effect_not_applied: bool = False


class RetirementRequestIn(In):
    workspace: str = Field(max_length=MAX_SLUG_CHARS, pattern=SLUG_PATTERN)
    reason: ReasonText
    confirm: str = Field(max_length=MAX_SLUG_CHARS, description="the workspace's slug typed again")


class Page(Schema):
    items: list[dict[str, Any]]
    next_cursor: str | None


CURSOR_PATTERN = "^[0-9]{1,16}-[0-9a-f]{32}$"  # the last row's time (µs since 1970) and id
errors.PATTERN_WORDS[CURSOR_PATTERN] = "give the next_cursor of the page before, as it was given"


class Listing(Schema):
    model_config = ConfigDict(extra="forbid", regex_engine="python-re")
    limit: int = Field(50, ge=1, le=MAX_PAGE)
    cursor: str | None = Field(None, pattern=CURSOR_PATTERN, description="next_cursor of the page before")


class DeletionListing(Listing):
    status: DeletionStatus | None = None


class RetirementListing(Listing):
    status: RequestStatus | None = None


ERRORS = {400: dict, 401: dict, 403: dict, 404: dict, 409: dict, 413: dict, 429: dict}


def _deletion(request: HttpRequest, request_id: str | UUID) -> dict[str, Any]:
    holder = reading(request)
    authority.require(holder.actor, deletions.VIEW)
    return deletion_reading.case_view(request_id, lens=access.Lens.of(holder.actor.user), now=clock.now())


def _retirement(request: HttpRequest, request_id: str | UUID) -> dict[str, Any]:
    authority.require(reading(request).actor, retirements.VIEW)
    return retirement_selectors.describe(retirement_selectors.get(request_id))


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _cursor(raw: str | None) -> tuple[datetime, UUID] | None:
    """A page's position (`CURSOR_PATTERN`): the last row's time and id. Any cursor of that shape
    reads as a position; one before 1970 or past 2286 is no row's."""
    if not raw:
        return None
    micros, _, rid = raw.partition("-")
    return EPOCH + timedelta(microseconds=int(micros)), UUID(hex=rid)


def _page(request: HttpRequest, rows: QuerySet[Any], listing: Listing, *, when: str, view: Any) -> dict[str, Any]:
    unknown = sorted(set(request.GET) - {"status", *Listing.model_fields})
    if unknown:
        raise BadInput(
            f"unknown query parameter {unknown[0][:40]!r}: give status, limit or cursor", field=unknown[0][:40]
        )
    status = getattr(listing, "status", None)
    if status is not None:
        rows = rows.filter(status=status)
    after = _cursor(listing.cursor)
    if after:
        rows = rows.filter(Q(**{f"{when}__lt": after[0]}) | Q(**{when: after[0], "id__lt": after[1]}))
    found = list(rows.order_by(f"-{when}", "-id")[: listing.limit + 1])
    more = len(found) > listing.limit
    found = found[: listing.limit]
    last = found[-1] if more else None
    token = f"{(getattr(last, when) - EPOCH) // timedelta(microseconds=1)}-{last.id.hex}" if last else None
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
def list_deletions(request: HttpRequest, listing: Query[DeletionListing]) -> dict[str, Any]:
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
        when="created_at",
        view=view,
    )


@deletions_router.get("/{request_id}", response={200: dict, **ERRORS}, summary="Read one deletion")
def read_deletion(request: HttpRequest, request_id: UUID) -> dict[str, Any]:
    return _deletion(request, request_id)


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

    def view(request: HttpRequest, request_id: UUID, payload: Any) -> Status[dict[str, Any]]:
        holder = deciding(request)
        rid = str(request_id)

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
def list_retirements(request: HttpRequest, listing: Query[RetirementListing]) -> dict[str, Any]:
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
        when="requested_at",
        view=view,
    )


@retirements_router.get("/{request_id}", response={200: dict, **ERRORS}, summary="Read one retirement")
def read_retirement(request: HttpRequest, request_id: UUID) -> dict[str, Any]:
    return _retirement(request, request_id)


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
