"""The JSON API: every endpoint for every role, four eyes across API and console, idempotency,
bad input with nothing written, tokens refused, the rate limit, the OpenAPI document."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client, override_settings
from django.urls import reverse

from api.models import IdempotencyKey
from core import clock, tokens
from core.models import ApiToken
from deletions.models import DeletionRequest, Status
from retirements.models import Lifecycle, RetirementRequest, Workspace
from tests.support import force, table_rows

CASE_TABLES = ("entity_deletion_requests", "entity_deletion_decisions", "retirements_retirementrequest")


def rows() -> dict[str, Any]:
    return table_rows(*CASE_TABLES, "api_idempotency_keys")


def submitted(api, who: str = "operator", target: str = "demo:api-alice") -> dict[str, Any]:
    answer = api(who, "POST", "/api/v1/deletions", {"target": target, "reason": "ticket DSR-1"})
    assert answer.status == 201, answer.data
    return answer.data


def workspace(slug: str = "api-old") -> Workspace:
    return Workspace.objects.create(
        slug=slug, name=slug.title(), lifecycle=Lifecycle.DISABLED, activated_at=clock.now(), created_at=clock.now()
    )


# Who may do what: the same permission checks as the console (the services make them).
ALLOWED = {
    "submit": {"operator", "intake"},
    "read": {"operator", "approver", "support", "intake"},
    "approve": {"approver"},
    "revoke": {"approver"},
    "cancel": {"operator", "approver"},
    "resume": {"operator"},
    "request_retirement": {"operator", "intake"},
    "hold": {"operator"},
    "release": {"operator"},
    "cancel_retirement": {"operator"},
    "read_retirement": {"operator", "approver", "support", "intake"},
}


@pytest.mark.parametrize("role", ["operator", "approver", "support", "intake", "none"])
def test_every_endpoint_allows_or_refuses_each_role(api, staff, role: str) -> None:
    def allowed(action: str, answer: Any, ok: int = 200) -> None:
        if role in ALLOWED[action]:
            assert answer.status in (ok, 409), (action, answer.status, answer.data)  # 409: the state refused it
        else:
            assert answer.status == 403, (action, answer.status, answer.data)
            assert answer.data["error"]["code"] == "not_allowed"
            assert "is not allowed to" in answer.data["error"]["message"]

    mine = api(role, "POST", "/api/v1/deletions", {"target": f"demo:api-{role}", "reason": "portal"})
    allowed("submit", mine, 201)
    case = submitted(api, "operator", "demo:api-shared")
    allowed("read", api(role, "GET", f"/api/v1/deletions/{case['request']['id']}"))
    allowed("read", api(role, "GET", "/api/v1/deletions"))
    resume = api(role, "POST", f"/api/v1/deletions/{case['request']['id']}/resume", {"reason": "try"})
    allowed("resume", resume)
    if role in ALLOWED["resume"]:
        assert resume.status == 409 and "only a request that needs attention" in resume.data["error"]["message"]
    digest = case["request"]["inventory_digest"]
    approve = api(role, "POST", f"/api/v1/deletions/{case['request']['id']}/approve", {"inventory_digest": digest})
    allowed("approve", approve)
    if role != "approver":  # approve as someone who may, so revoke has an approval to revoke
        assert (
            api(
                "approver", "POST", f"/api/v1/deletions/{case['request']['id']}/approve", {"inventory_digest": digest}
            ).status
            == 200
        )
    allowed("revoke", api(role, "POST", f"/api/v1/deletions/{case['request']['id']}/revoke", {"reason": "hold on"}))
    allowed("cancel", api(role, "POST", f"/api/v1/deletions/{case['request']['id']}/cancel", {"reason": "withdrawn"}))

    ws = workspace(f"api-{role}")
    asked = api(role, "POST", "/api/v1/retirements", {"workspace": ws.slug, "reason": "unused", "confirm": ws.slug})
    allowed("request_retirement", asked, 201)
    other = workspace(f"api-{role}-2")
    made = api(
        "operator", "POST", "/api/v1/retirements", {"workspace": other.slug, "reason": "x", "confirm": other.slug}
    )
    assert made.status == 201, made.data
    rid = made.data["id"]
    allowed("read_retirement", api(role, "GET", f"/api/v1/retirements/{rid}"))
    allowed("read_retirement", api(role, "GET", "/api/v1/retirements"))
    allowed("hold", api(role, "POST", f"/api/v1/retirements/{rid}/hold", {"reason": "check"}))
    allowed("release", api(role, "POST", f"/api/v1/retirements/{rid}/release", {"reason": "fine"}))
    allowed("cancel_retirement", api(role, "POST", f"/api/v1/retirements/{rid}/cancel", {"reason": "no"}))


def test_a_deletion_through_the_api_from_submission_to_cancel(api, staff) -> None:
    case = submitted(api)
    rid = case["request"]["id"]
    assert case["request"]["status"] == Status.SUBMITTED and case["request"]["requested_by"] == "operator-1"
    assert case["responsible"] in ("approver-1", "approver-2") and case["due_at"] and case["proposal"]
    assert DeletionRequest.objects.get(id=rid).requested_by_user_id == staff["operator"].pk
    digest = case["request"]["inventory_digest"]
    approved = api("approver", "POST", f"/api/v1/deletions/{rid}/approve", {"inventory_digest": digest})
    assert approved.status == 200 and approved.data["request"]["status"] == Status.APPROVED
    assert approved.data["approvals"][0]["approved_by"] == "approver-1"
    again = api("approver", "POST", f"/api/v1/deletions/{rid}/approve", {"inventory_digest": digest})
    assert again.status == 409 and "cannot be approved again" in again.data["error"]["message"]
    revoked = api("approver", "POST", f"/api/v1/deletions/{rid}/revoke", {"reason": "customer called"})
    assert revoked.status == 200 and revoked.data["approvals"][0]["revoked_at"]
    cancelled = api("operator", "POST", f"/api/v1/deletions/{rid}/cancel", {"reason": "withdrawn"})
    assert cancelled.status == 200 and cancelled.data["request"]["status"] == Status.CANCELLED
    actions = list(DeletionRequest.objects.get(id=rid).decisions.values_list("actor_label", "action"))
    assert ("operator-1", "submit") in actions and ("approver-1", "approve") in actions
    assert ("approver-1", "revoke_approval") in actions
    assert ("operator-1", "cancel") in actions


def test_confirm_not_applied_through_the_api_asks_the_target_system(api, staff) -> None:
    case = submitted(api)
    rid = case["request"]["id"]
    force(DeletionRequest.objects.filter(id=rid), status="needs_attention", lease_owner=None)
    answer = api(
        "operator", "POST", f"/api/v1/deletions/{rid}/resume", {"reason": "checked", "effect_not_applied": True}
    )
    assert answer.status == 409
    assert "the current stage submitted nothing, so no effect is unknown" in answer.data["error"]["message"]
    resumed = api("operator", "POST", f"/api/v1/deletions/{rid}/resume", {"reason": "fixed the vendor"})
    assert resumed.status == 200 and resumed.data["request"]["status"] == Status.RETRY_WAIT


def test_support_reads_the_target_masked_and_no_evidence(api, staff) -> None:
    case = submitted(api, target="demo:api-secret-person")
    seen = api("support", "GET", f"/api/v1/deletions/{case['request']['id']}")
    assert seen.status == 200 and seen.data["request"]["target"] == "demo:ap…on"
    assert "api-secret-person" not in json.dumps(seen.data)
    listed = api("support", "GET", "/api/v1/deletions")
    assert [i["target"] for i in listed.data["items"]] == ["demo:ap…on"]


def test_the_list_filters_and_pages_with_a_cursor(api, staff) -> None:
    ids = [submitted(api, target=f"demo:api-page-{i}")["request"]["id"] for i in range(5)]
    DeletionRequest.objects.filter(id=ids[0]).update(status="cancelled")
    first = api("operator", "GET", "/api/v1/deletions?limit=2")
    assert first.status == 200 and len(first.data["items"]) == 2 and first.data["next_cursor"]
    seen = [i["id"] for i in first.data["items"]]
    cursor = first.data["next_cursor"]
    while cursor:
        page = api("operator", "GET", f"/api/v1/deletions?limit=2&cursor={cursor}")
        seen += [i["id"] for i in page.data["items"]]
        cursor = page.data["next_cursor"]
    assert seen == list(reversed(ids))  # newest first, each once
    only = api("operator", "GET", "/api/v1/deletions?status=cancelled")
    assert [i["id"] for i in only.data["items"]] == [ids[0]]
    for query, field in [
        ("status=nonsense", "status"),
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("cursor=zz", "cursor"),
    ]:
        bad = api("operator", "GET", f"/api/v1/deletions?{query}")
        assert bad.status == 400 and bad.data["error"]["field"] == field, (query, bad.data)
    assert api("operator", "GET", "/api/v1/deletions?unknown=1").status == 400


def test_four_eyes_holds_across_the_api_and_the_console(api, staff) -> None:
    staff["approver"].groups.add(*staff["operator"].groups.all())  # approver-1 may submit and approve, not both
    mine = submitted(api, "approver")
    rid, digest = mine["request"]["id"], mine["request"]["inventory_digest"]
    console = Client()
    console.force_login(staff["approver"])
    url = reverse("admin:deletions_deletionrequest_approve", args=[rid])
    response = console.post(url, {"inventory_digest": digest, "confirm": "on"}, follow=True)
    assert any("four eyes: approver-1 submitted request" in str(m) for m in response.context["messages"])
    refused = api("approver", "POST", f"/api/v1/deletions/{rid}/approve", {"inventory_digest": digest})
    assert refused.status == 409 and "four eyes: approver-1 submitted" in refused.data["error"]["message"]
    assert DeletionRequest.objects.get(id=rid).status == Status.SUBMITTED
    console.force_login(staff["approver2"])
    assert console.post(url, {"inventory_digest": digest, "confirm": "on"}).status_code == 302
    req = DeletionRequest.objects.get(id=rid)
    assert req.status == Status.APPROVED and list(req.approvals.values_list("approved_by", flat=True)) == ["approver-2"]


def test_idempotency_key_gives_the_first_answer_and_refuses_another_body(api, staff) -> None:
    key = {"Idempotency-Key": "portal-ticket-77"}
    first = api("intake", "POST", "/api/v1/deletions", {"target": "demo:api-idem", "reason": "r"}, headers=key)
    again = api("intake", "POST", "/api/v1/deletions", {"target": "demo:api-idem", "reason": "r"}, headers=key)
    assert first.status == again.status == 201
    assert again.data["request"]["id"] == first.data["request"]["id"]
    assert DeletionRequest.objects.filter(target="demo:api-idem").count() == 1
    before = rows()
    other = api("intake", "POST", "/api/v1/deletions", {"target": "demo:api-other", "reason": "r"}, headers=key)
    assert other.status == 409 and other.data["error"]["code"] == "idempotency_key_reused"
    assert other.data["error"]["field"] == "Idempotency-Key"
    assert rows() == before
    # The key is the caller's: another person's same key is another request.
    theirs = api("operator", "POST", "/api/v1/deletions", {"target": "demo:api-idem-2", "reason": "r"}, headers=key)
    assert theirs.status == 201 and theirs.data["request"]["id"] != first.data["request"]["id"]


def test_a_refused_first_request_keeps_no_key(api, staff) -> None:
    key = {"Idempotency-Key": "k-refused"}
    refused = api("intake", "POST", "/api/v1/deletions", {"target": "no-prefix", "reason": "r"}, headers=key)
    assert refused.status == 400
    assert not IdempotencyKey.objects.exists()
    fixed = api("intake", "POST", "/api/v1/deletions", {"target": "demo:api-fixed", "reason": "r"}, headers=key)
    assert fixed.status == 201


@pytest.mark.django_db(transaction=True)
def test_two_requests_at_once_with_one_key_make_one_request(api, staff, token) -> None:
    raw = token("intake")
    body = json.dumps({"target": "demo:api-race", "reason": "r"})
    go = threading.Barrier(2)
    answers: list[Any] = [None, None]

    def send(i: int) -> None:
        try:
            go.wait(timeout=60)
            response = Client().post(
                "/api/v1/deletions",
                body,
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {raw}",
                HTTP_IDEMPOTENCY_KEY="race-1",
            )
            answers[i] = (response.status_code, response.json())
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert [a[0] for a in answers] == [201, 201], answers
    assert answers[0][1]["request"]["id"] == answers[1][1]["request"]["id"]
    assert DeletionRequest.objects.filter(target="demo:api-race").count() == 1


@pytest.mark.parametrize(
    ("raw", "code", "field"),
    [
        ("{not json", "bad_json", None),
        ('["a", "list"]', "invalid", None),
        ('{"target": 7, "reason": "r"}', "invalid", "target"),
        ('{"target": "demo:api-x", "reason": ["r"]}', "invalid", "reason"),
        ('{"reason": "r"}', "invalid", "target"),
        ('{"target": "demo:api-x", "reason": "r", "priority": "high"}', "invalid", "priority"),
        ('{"target": "demo:api-x\\u0000", "reason": "r"}', "invalid", "target"),
        ('{"target": "demo:api-x", "reason": "r\\u001b[31m"}', "invalid", "reason"),
        ('{"target": "demo:api-x", "reason": "r", "received_at": "yesterday"}', "invalid", "received_at"),
    ],
    ids=["bad-json", "not-object", "wrong-type", "list-reason", "missing", "unknown-field", "nul", "ansi", "bad-time"],
)
def test_bad_input_is_a_4xx_json_error_and_writes_nothing(api, staff, raw: str, code: str, field: str | None) -> None:
    before = rows()
    answer = api("operator", "POST", "/api/v1/deletions", raw=raw)
    assert answer.status == 400, answer.data
    assert set(answer.data) == {"error"} and set(answer.data["error"]) == {"code", "message", "field"}
    assert answer.data["error"]["code"] == code and answer.data["error"]["field"] == field, answer.data
    assert "pattern" not in answer.data["error"]["message"] and len(answer.data["error"]["message"]) < 200
    assert rows() == before


def test_a_huge_body_is_refused_unread(api, staff) -> None:
    before = rows()
    answer = api("operator", "POST", "/api/v1/deletions", {"target": "demo:api-x", "reason": "x" * 100_000})
    assert answer.status == 413 and answer.data["error"]["code"] == "too_large"
    assert rows() == before


def test_unknown_ids_and_bad_ids_are_404_and_400(api, staff) -> None:
    missing = api("operator", "GET", "/api/v1/deletions/00000000-0000-0000-0000-000000000000")
    assert missing.status == 404 and missing.data["error"]["code"] == "not_found"
    assert api("operator", "GET", "/api/v1/deletions/not-a-uuid").status == 400
    assert api("operator", "POST", "/api/v1/retirements/not-a-uuid/hold", {"reason": "x"}).status == 400
    assert api("operator", "GET", "/api/v1/nothing-here").status == 404


def test_tokens_that_prove_nobody_are_401(api, staff, token) -> None:
    raw = token("operator")
    assert api(None, "GET", "/api/v1/deletions").status == 401
    for header in [raw, f"Token {raw}", "Bearer ", "Bearer bo_unknown", f"Bearer {raw}x"]:
        answer = Client().get("/api/v1/deletions", HTTP_AUTHORIZATION=header)
        assert answer.status_code == 401, header
        assert answer.json()["error"]["code"] == "unauthenticated"
    ApiToken.objects.filter(digest=tokens.digest(raw)).update(revoked_at=clock.now())
    revoked = Client().get("/api/v1/deletions", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert revoked.status_code == 401 and "was revoked" in revoked.json()["error"]["message"]
    old = tokens.issue(staff["operator"], name="old", scope="decide", now=clock.now() - timedelta(days=91))
    expired = Client().get("/api/v1/deletions", HTTP_AUTHORIZATION=f"Bearer {old}")
    assert expired.status_code == 401 and "expired" in expired.json()["error"]["message"]
    User.objects.filter(pk=staff["intake"].pk).update(is_active=False)
    gone = api("intake", "GET", "/api/v1/deletions")
    assert gone.status == 401 and "inactive" in gone.data["error"]["message"]


def test_a_read_token_reads_and_decides_nothing(api, staff) -> None:
    before = rows()
    answer = api("operator", "POST", "/api/v1/deletions", {"target": "demo:api-r", "reason": "r"}, scope="read")
    assert answer.status == 403 and "may only read" in answer.data["error"]["message"]
    assert rows() == before
    assert api("operator", "GET", "/api/v1/deletions", scope="read").status == 200


def test_each_use_sets_last_used(api, staff, token) -> None:
    raw = token("support", "read")
    assert ApiToken.objects.get(digest=tokens.digest(raw)).last_used_at is None
    api("support", "GET", "/api/v1/deletions", scope="read")
    assert ApiToken.objects.get(digest=tokens.digest(raw)).last_used_at is not None


@override_settings(API_RATE_PER_MINUTE=3)
def test_the_rate_limit_is_per_token(api, staff) -> None:
    codes = [api("support", "GET", "/api/v1/deletions", scope="read").status for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    limited = api("support", "GET", "/api/v1/deletions", scope="read")
    assert limited.data["error"]["code"] == "rate_limited" and int(limited.headers["Retry-After"]) <= 60
    assert api("operator", "GET", "/api/v1/deletions").status == 200  # another token is not limited


def test_the_openapi_document_validates_and_the_docs_load(staff) -> None:
    from openapi_spec_validator import validate

    document = Client().get("/api/v1/openapi.json")
    assert document.status_code == 200
    spec = document.json()
    validate(spec)
    paths = set(spec["paths"])
    for path in [
        "/api/v1/deletions",
        "/api/v1/deletions/{request_id}",
        "/api/v1/deletions/{request_id}/approve",
        "/api/v1/deletions/{request_id}/revoke",
        "/api/v1/deletions/{request_id}/cancel",
        "/api/v1/deletions/{request_id}/resume",
        "/api/v1/retirements",
        "/api/v1/retirements/{request_id}",
        "/api/v1/retirements/{request_id}/hold",
        "/api/v1/retirements/{request_id}/release",
        "/api/v1/retirements/{request_id}/cancel",
        "/api/v1/retirements/{request_id}/resume",
    ]:
        assert path in paths, path
    docs = Client().get("/api/v1/docs")
    assert docs.status_code == 200 and b"swagger-ui" in docs.content


def test_a_retirement_through_the_api(api, staff) -> None:
    ws = workspace("api-flow")
    wrong = api("operator", "POST", "/api/v1/retirements", {"workspace": ws.slug, "reason": "x", "confirm": "other"})
    assert wrong.status == 409 and "confirmation does not match" in wrong.data["error"]["message"]
    assert not RetirementRequest.objects.exists()
    made = api("intake", "POST", "/api/v1/retirements", {"workspace": ws.slug, "reason": "unused", "confirm": ws.slug})
    assert made.status == 201 and made.data["status"] == "waiting" and made.data["requested_by"] == "intake-1"
    rid = made.data["id"]
    held = api("operator", "POST", f"/api/v1/retirements/{rid}/hold", {"reason": "asking the owner"})
    assert held.status == 200 and held.data["status"] == "held"
    assert api("operator", "POST", f"/api/v1/retirements/{rid}/hold", {"reason": "again"}).status == 409
    released = api("operator", "POST", f"/api/v1/retirements/{rid}/release", {"reason": "owner agreed"})
    assert released.status == 200 and released.data["status"] == "waiting"
    resumed = api("operator", "POST", f"/api/v1/retirements/{rid}/resume", {"reason": "x"})
    assert resumed.status == 409  # a live watcher is not replaced
    cancelled = api("operator", "POST", f"/api/v1/retirements/{rid}/cancel", {"reason": "owner keeps it"})
    assert cancelled.status == 200 and cancelled.data["status"] == "cancelled"
    assert RetirementRequest.objects.get(id=rid).workspace.lifecycle == Lifecycle.DISABLED
    listed = api("intake", "GET", "/api/v1/retirements?status=cancelled")
    assert [i["id"] for i in listed.data["items"]] == [rid]
