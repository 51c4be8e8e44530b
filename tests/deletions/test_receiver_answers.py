"""What the back-office makes of a receiver's answers (issue 50, items 6 and 7): "nothing changed, retry"
is a plain retry, never an unknown effect; a constraint of the application's database and data that
remains go to a person, never back to review and never completed; rules changed since the approval go
back to review; an effect the lookup cannot settle is said to be in question, never "nothing applied";
a refusal in a later community names the communities already done; the first grant carries every
approved community's data version, and the inventory, the preview and the approval carry the rules.

The answers the demo target does not give come from a stand-in mounted in front of the reference
receiver (`tests.deletions.standin`): everything else is the reference receiver's own answer."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
import time_machine

from core.authority import named
from core.errors import Refused
from deletions import proposal, targets
from deletions.contract import APPROVERS, OPERATORS_ON_CALL, SYSTEM
from deletions.models import DeletionAlarm, DeletionDecision, DeletionRequest, StageAttempt, StageHistory
from deletions.rules.inventory import COMMUNITY_B, COMMUNITY_C, build_inventory, validate_inventory
from deletions.services import deletion_close_alarm, deletion_resume
from deletions.store import alarms
from deletions.store.requests import inventory_digest
from ops.health import report
from tests.conftest import DEMO_RECEIVER_URL, ensure_demo_receiver, submit_and_approve
from tests.deletions.helpers import effects
from tests.deletions.standin import APPLIED, Rule, mounted
from tests.target import OWN_RECORDS
from wire import keys

pytestmark = pytest.mark.django_db(transaction=True)

WHERE = f"demo target system at {DEMO_RECEIVER_URL}"
RULES_DIGEST = "ab12" * 16


@pytest.fixture
def standin(settings) -> Iterator[list[Rule]]:
    yield from mounted(settings)


def refused(kind: str, message: str) -> tuple[int, dict]:
    return 422, {"refused": {"kind": kind, "message": message}}


def run(cmd, req, *, at=None):
    """One run of the case (at `at`, with the clock moving from there)."""
    if at is None:
        return cmd("run_deletion", str(req.id))
    with time_machine.travel(at, tick=True):
        return cmd("run_deletion", str(req.id))


def due(req) -> datetime:
    """Just after the case's next attempt is due."""
    at = DeletionRequest.objects.get(id=req.id).next_attempt_at
    assert at is not None
    return at + timedelta(seconds=1)


def resumed(req) -> None:
    deletion_resume(actor=named("operator-c"), request_id=req.id, reason="the receiver's dataset file was fixed")


def test_nothing_changed_retry_is_a_plain_retry_with_no_unknown_effect_and_the_case_completes(cmd, standin) -> None:
    standin.append(
        Rule(
            "apply",
            when=lambda g: g["action"] == "gate_user",
            answer=(
                409,
                {
                    "retry": {
                        "kind": "lock_timeout",
                        "message": "nothing changed: canceling statement due to lock timeout (lock timeout); "
                        "the transaction rolled back; retry",
                    }
                },
            ),
            times=1,
        )
    )
    req = submit_and_approve("demo:busy")
    ran = run(cmd, req)
    assert ran.code == 1, ran.err
    case = DeletionRequest.objects.get(id=req.id)
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    assert case.status == "retry_wait" and case.open_question == "" and case.owner == SYSTEM
    assert case.next_attempt_at is not None
    said = f"nothing changed at {WHERE} (lock_timeout): canceling statement due to lock timeout"
    assert (case.last_error or "").startswith(said), case.last_error
    assert (case.last_error or "").endswith(f"; retried at {case.next_attempt_at:%Y-%m-%d %H:%M:%S} UTC"), (
        case.last_error
    )
    assert gate.status == "failed" and gate.last_error == case.last_error
    assert StageAttempt.objects.get(stage=gate).outcome == "failed"
    assert not DeletionAlarm.objects.filter(request_id=req.id).exists()  # no alarm, no effect unknown
    assert effects(req.id) == []  # the stand-in's receiver changed nothing
    health = report(case.updated_at)
    assert health["checks"]["refused_at_target"]["ok"] and health["checks"]["integrity_faults"]["ok"]

    # The retry: the row was marked submitted before the call, so it is looked up first (a signed "not
    # found" past the submission) and sent again under the same operation id, once.
    done = run(cmd, req, at=due(req))
    assert done.code == 0, done.err
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    assert not DeletionAlarm.objects.filter(request_id=req.id).exists()
    assert [a.outcome for a in StageAttempt.objects.filter(stage=gate).order_by("attempt")] == ["failed", "completed"]
    ops = [op for op, _, _ in effects(req.id)]
    assert len(ops) == len(set(ops)) == 6
    assert [g["operation_id"] for g in APPLIED if g["action"] == "gate_user"] == [str(gate.operation_id)] * 2


def test_a_constraint_in_a_later_community_goes_to_a_person_naming_what_is_done_and_resumes(cmd, standin) -> None:
    message = (
        'new row for relation "orders" violates check constraint "orders_total_check" '
        "(dataset entry tables.orders.anonymize.total)"
    )
    standin.append(
        Rule(
            "apply",
            when=lambda g: g["action"] == "purge_db" and g["community_id"] == COMMUNITY_C,
            answer=refused("constraint", message),
            times=1,
        )
    )
    req = submit_and_approve("demo:constraint")
    ran = run(cmd, req)
    assert ran.code == 1 and "waiting for an operator" in ran.err and "orders_total_check" in ran.err, ran.err
    case = DeletionRequest.objects.get(id=req.id)
    row = StageHistory.objects.get(request_id=req.id, is_current=True)
    assert case.status == "needs_attention" and case.owner == OPERATORS_ON_CALL and case.next_check_at is not None
    assert case.next_check_at > case.updated_at
    assert f"refused by the target system (constraint): {message}" in case.open_question
    assert f"nothing of purge_db in community {COMMUNITY_C} was applied" in case.open_question
    assert f"already done: community {COMMUNITY_B} (their evidence is saved)" in case.open_question
    assert "then resume" in case.open_question and "approve" not in case.open_question
    assert (row.stage, str(row.target_community_id), row.status) == ("purge_db", COMMUNITY_C, "pending")
    assert row.submitted_at is None  # refused: nothing applied, nothing in question
    assert StageAttempt.objects.get(stage=row).outcome == "refused"
    open_alarms = DeletionAlarm.objects.filter(request_id=req.id, resolved_at__isnull=True)
    assert [a.kind for a in open_alarms] == [alarms.BOUNDARY_REFUSED] and "orders_total_check" in open_alarms[0].message
    assert [a for _, a, _ in effects(req.id)] == ["gate_user", "purge_db", "purge_agents"]  # B done, C untouched
    health = report(case.updated_at)
    assert health["status"] == "red" and health["checks"]["refused_at_target"] == {"ok": False, "count": 1}
    assert health["work"]["needs_attention"]["count"] == 1

    resumed(req)  # the operator had the dataset file put right
    assert not DeletionAlarm.objects.filter(request_id=req.id, resolved_at__isnull=True).exists()
    done = run(cmd, req, at=due(req))
    assert done.code == 0, done.err
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    assert len(effects(req.id)) == 6


def test_a_call_the_receiver_refused_whole_goes_to_a_person_and_a_replayed_one_stays_unknown(cmd, standin) -> None:
    """A 401 for the call's signature (after a key rotation, a public URL registered wrong) applied
    nothing and changes nothing when sent again: a person mends it, told in the receiver's words. A 401
    for a replayed nonce is no such refusal: a copy of the call reached the receiver first and may have
    applied, so the effect is unknown and looked up, never called not applied."""
    said = "call refused: its signature does not verify (no caller key 'backoffice' is configured at this receiver)"
    standin.append(
        Rule(
            "apply",
            when=lambda g: g["action"] == "purge_db" and g["community_id"] == COMMUNITY_B,
            answer=(401, {"error": said, "kind": "signature"}),
            times=1,
        )
    )
    req = submit_and_approve("demo:refused-call")
    ran = run(cmd, req)
    assert ran.code == 1 and "waiting for an operator" in ran.err, ran.err
    case = DeletionRequest.objects.get(id=req.id)
    row = StageHistory.objects.get(request_id=req.id, is_current=True)
    assert case.status == "needs_attention" and case.owner == OPERATORS_ON_CALL
    assert f"{WHERE} refused the call itself (HTTP 401: {said}), so nothing was applied" in case.open_question
    assert "then resume" in case.open_question and "approve" not in case.open_question
    assert (row.stage, str(row.target_community_id), row.submitted_at) == ("purge_db", COMMUNITY_B, None)
    assert StageAttempt.objects.get(stage=row).outcome == "refused"
    assert [a for _, a, _ in effects(req.id)] == ["gate_user"]  # the refused call applied nothing
    resumed(req)
    assert run(cmd, req, at=due(req)).code == 0
    assert DeletionRequest.objects.get(id=req.id).status == "completed" and len(effects(req.id)) == 6

    replayed = "call refused: replayed (this nonce was used before)"
    standin.append(
        Rule(
            "apply",
            when=lambda g: g["action"] == "purge_db" and g["community_id"] == COMMUNITY_B,
            answer=(401, {"error": replayed, "kind": "replayed"}),
            times=1,
        )
    )
    other = submit_and_approve("demo:replayed-call")
    assert run(cmd, other).code == 1
    row = StageHistory.objects.get(request_id=other.id, is_current=True)
    assert row.submitted_at is not None  # the effect is in question: the next attempt looks it up first
    assert StageAttempt.objects.get(stage=row).outcome == "effect_unknown"
    case = DeletionRequest.objects.get(id=other.id)
    assert case.status == "retry_wait" and case.owner == OPERATORS_ON_CALL
    assert case.open_question == f"did operation {row.operation_id} (purge_db) take effect? the next check looks it up"
    assert f"(HTTP 401: {replayed})" in (case.last_error or "") and "looked up before anything is resent" in (
        case.last_error or ""
    )


def test_data_that_remains_after_the_last_effect_is_never_completed(cmd, standin) -> None:
    standin.append(
        Rule(
            "apply",
            when=lambda g: g["action"] == "purge_db" and g["community_id"] == OWN_RECORDS,  # the last effect
            answer=refused("incomplete", "data remains in orders: 3, favourites: 2"),
        )
    )
    req = submit_and_approve("demo:remains")
    assert run(cmd, req).code == 1
    case = DeletionRequest.objects.get(id=req.id)
    assert case.status == "needs_attention" and case.owner == OPERATORS_ON_CALL
    assert "(incomplete): data remains in orders: 3, favourites: 2" in case.open_question
    assert f"nothing of purge_db in community {OWN_RECORDS} was applied" in case.open_question
    assert f"already done: communities {COMMUNITY_B}, {COMMUNITY_C} (their evidence is saved)" in case.open_question
    assert DeletionRequest.objects.get(id=req.id).completed_at is None
    # Resumed while the data still remains: refused again, never completed.
    resumed(req)
    assert run(cmd, req, at=due(req)).code == 1
    case = DeletionRequest.objects.get(id=req.id)
    assert case.status == "needs_attention" and "data remains in orders" in case.open_question
    assert DeletionAlarm.objects.filter(request_id=req.id, kind=alarms.BOUNDARY_REFUSED, resolved_at=None).count() == 1


def test_rules_changed_since_the_approval_send_the_case_back_to_review(cmd, standin) -> None:
    standin.append(
        Rule(
            "apply",
            when=lambda g: g["action"] == "gate_user",
            answer=refused("rules_changed", "the deletion rules changed: v1 → v2"),
            times=1,
        )
    )
    req = submit_and_approve("demo:rules-changed")
    ran = run(cmd, req)
    assert ran.code == 1 and "back in review, nothing applied" in ran.err, ran.err
    case = DeletionRequest.objects.get(id=req.id)
    assert case.status == "needs_review" and case.owner == APPROVERS
    assert "refused by the target system (rules_changed): the deletion rules changed: v1 → v2" in case.open_question
    assert "already done" not in case.open_question  # the gate: nothing was done before it
    assert [a.kind for a in DeletionAlarm.objects.filter(request_id=req.id)] == [alarms.BOUNDARY_REFUSED]
    assert effects(req.id) == []


def test_the_first_grant_carries_every_approved_communitys_data_version_and_no_other_does(cmd, standin) -> None:
    req = submit_and_approve("demo:versions")
    approval = DeletionRequest.objects.get(id=req.id).approvals.get()
    assert run(cmd, req).code == 0
    gate = next(g for g in APPLIED if g["action"] == "gate_user")
    assert gate["expected_versions"] == {cid: seen["version"] for cid, seen in approval.preview.items()}
    assert set(gate["expected_versions"]) == {COMMUNITY_B, COMMUNITY_C, OWN_RECORDS}
    assert all("expected_versions" not in g for g in APPLIED if g["action"] != "gate_user")
    assert len(APPLIED) == 6


def test_a_lookup_under_a_key_not_registered_says_the_effect_is_in_question_never_nothing_applied(cmd) -> None:
    stranger = keys.public_text(keys.private(secrets.token_bytes(32)))
    registered = targets.registered()[0]
    kid = next(iter(registered.keys))
    targets.register(name=registered.name, prefix="demo:", base_url=registered.base_url, keys={kid: stranger})
    req = submit_and_approve("demo:key-changed")
    assert run(cmd, req).code == 1  # applied there; its answer not believed: effect unknown
    case = DeletionRequest.objects.get(id=req.id)
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    assert case.status == "retry_wait" and "effect unknown" in (case.last_error or "")

    ran = run(cmd, req, at=due(req))  # the lookup finds it, under that key
    assert ran.code == 1 and "nothing applied" not in ran.err, ran.err
    case = DeletionRequest.objects.get(id=req.id)
    gate = StageHistory.objects.get(id=gate.id)
    assert case.status == "needs_attention" and case.owner == OPERATORS_ON_CALL
    words = f"{WHERE} has a record of operation {gate.operation_id}, so it may have been applied"
    assert words in case.open_question and "does not verify" in case.open_question
    assert "nothing applied" not in case.open_question and "register its new key" in case.open_question
    assert gate.status == "pending" and gate.submitted_at is not None  # in question: looked up again, never resent
    last = StageAttempt.objects.filter(stage=gate).order_by("attempt").last()
    assert last is not None and last.outcome == "effect_unknown"
    decision = DeletionDecision.objects.filter(request_id=req.id).order_by("created_at").last()
    assert decision is not None and decision.action == "effect_in_question" and words in decision.reason
    assert DeletionAlarm.objects.get(request_id=req.id, kind=alarms.INTEGRITY, resolved_at=None)
    assert len(effects(req.id)) == 1

    ensure_demo_receiver()  # the key the receiver signs with now, registered
    with pytest.raises(Refused, match="an integrity fault is open on this case, so it cannot be resumed"):
        resumed(req)  # an integrity fault is closed by a person's own decision first, never by a resume
    deletion_close_alarm(
        actor=named("operator-b"), request_id=req.id, reason="the receiver's key was rotated; its new key registered"
    )
    resumed(req)
    assert run(cmd, req, at=due(req)).code == 0
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    assert not DeletionAlarm.objects.filter(request_id=req.id, resolved_at=None).exists()
    assert [a for _, a, _ in effects(req.id)].count("gate_user") == 1  # looked up, never resent


def test_evidence_naming_another_operation_says_what_the_receiver_recorded(cmd, standin) -> None:
    from receiver import signing

    other = "00000000-0000-4000-8000-00000000abcd"
    standin.append(
        Rule(
            "apply",
            when=lambda g: g["action"] == "gate_user",
            answer=(200, {"evidence": signing.evidence({"operation_id": other, "gated": True})}),
            times=1,
        )
    )
    req = submit_and_approve("demo:contradicts")
    assert run(cmd, req).code == 1
    case = DeletionRequest.objects.get(id=req.id)
    gate = StageHistory.objects.get(request_id=req.id, stage="gate_user")
    assert case.status == "needs_attention" and gate.submitted_at is not None
    assert f"{WHERE} recorded operation {gate.operation_id} (gate_user), so it may have been applied" in (
        case.open_question
    )
    assert f"names operation_id '{other}'" in case.open_question and "gated True" in case.open_question
    assert "nothing applied" not in case.open_question and "result" not in gate.metadata_json


def test_the_inventory_preview_and_approval_carry_the_deletion_rules(cmd, standin) -> None:
    rules = {"dataset": "shop", "version": 1, "digest": RULES_DIGEST}

    def with_rules(said: dict) -> dict:
        return {"communities": {cid: {**c, "rules": rules} for cid, c in said["communities"].items()}}

    standin.append(
        Rule(
            "inventory",
            change=lambda said: {"communities": [{**c, "rules": RULES_DIGEST} for c in said["communities"]]},
        )
    )
    standin.append(Rule("preview", change=with_rules))
    req = submit_and_approve("demo:rules")
    saved = DeletionRequest.objects.get(id=req.id)
    assert [c["rules"] for c in saved.inventory_json["communities"]] == [RULES_DIGEST] * 3  # B, C, own records
    assert saved.inventory_digest == inventory_digest(saved.inventory_json)  # the digest covers the rules
    approval = saved.approvals.get()
    assert all(seen["rules"] == rules for seen in approval.preview.values())
    said = proposal.lines(proposal.of_request(saved))
    assert sum(f"rules: dataset shop v1 (digest {RULES_DIGEST[:12]}…)" in line for line in said) == 3, said
    shown = json.loads(cmd("show_deletion", str(req.id), "--json").out)["proposal"]["communities"]
    assert {c["rules_words"] for c in shown} == {f"rules: dataset shop v1 (digest {RULES_DIGEST[:12]}…)"}


def test_rules_and_the_new_roles_in_words() -> None:
    own = "00000000-0000-4000-8000-00000000000f"
    inventory = build_inventory(
        "demo:words",
        [
            {"id": COMMUNITY_B, "role": "not_a_member", "rules": RULES_DIGEST},
            {"id": own, "role": "own_records"},
        ],
    )
    assert inventory["communities"] == [
        {"id": COMMUNITY_B, "role": "not_a_member", "rules": RULES_DIGEST},
        {"id": own, "role": "own_records"},
    ]
    assert inventory_digest(inventory) != inventory_digest(
        build_inventory("demo:words", [{"id": COMMUNITY_B, "role": "not_a_member"}, {"id": own, "role": "own_records"}])
    )
    seen = {
        COMMUNITY_B: {"name": "B", "rows": 2, "agents": 0, "version": 4, "rules": {"dataset": "shop", "version": 2,
                                                                                    "digest": "cd34" * 16}},
        own: {"name": "their own records", "rows": 1, "agents": 0, "version": 1,
              "kept": {"invoices": {"rows": 3, "reason": "financial records: 10 years"}}},
    }  # fmt: skip
    p = proposal.build("demo:words", inventory, inventory_digest(inventory), seen=seen, source="saved")
    b, mine = p.communities
    assert (b.role_words, mine.role_words) == ("not a member (rows only)", "their own records, in no community")
    listed = f"not the rules the inventory listed (digest {RULES_DIGEST[:12]}…)"
    assert b.rules_words == f"rules: dataset shop v2 (digest {'cd34' * 3}…), {listed}"
    assert mine.rules_words == "" and mine.kept_words == "kept: invoices 3 rows (financial records: 10 years)"
    assert b.kept_words == "" and "kept" not in proposal.saved(p)[COMMUNITY_B]
    assert proposal.saved(p)[own]["kept"] == seen[own]["kept"]
    assert any(line.endswith("; kept: invoices 3 rows (financial records: 10 years)") for line in proposal.lines(p))
    assert proposal.saved(p)[COMMUNITY_B]["rules"] == seen[COMMUNITY_B]["rules"]
    assert "rules" not in proposal.saved(p)[own]
    bad = build_inventory("demo:words", [{"id": COMMUNITY_B, "role": "participant", "rules": "not hex!"}])
    with pytest.raises(Exception, match="is not a hex digest"):
        validate_inventory(bad)
