"""PostgreSQL itself refuses every lifecycle move the models do not declare, and every edit of
approval evidence but its one revocation, whatever writes the row (here: a plain cursor)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import Model

from core import clock
from core.authority import Actor
from core.lifecycle import declared_moves
from deletions.models import DeletionApproval, StageAttempt, StageHistory
from retirements.models import NoticeSlot, PurgeJob, RetirementWatcher
from retirements.services import retirement_request
from tests.architecture.test_lifecycles import fsm_field, label, lifecycle_fields
from tests.conftest import submit_and_approve

pytestmark = pytest.mark.django_db


def _raw(sql: str, params: list[Any]) -> None:
    with connection.cursor() as cur:
        cur.execute(sql, params)


def _force(table: str, column: str, pk: Any, state: str) -> None:
    """Put a row in `state` with the guards off (as a restore would), to try a move from there."""
    _raw("SET session_replication_role = replica", [])
    try:
        _raw(f'UPDATE "{table}" SET "{column}" = %s WHERE id = %s', [state, pk])
    finally:
        _raw("SET session_replication_role = origin", [])


@pytest.fixture
def one_of_each(django_user_model) -> dict[Any, Any]:
    """A saved row of every table with a lifecycle column."""
    from tests.retirements.conftest import ALL_PERMS, make_staff

    req = submit_and_approve()
    _raw(
        "INSERT INTO entity_deletion_stage_history (id, request_id, stage, status, is_current, metadata_json,"
        " operation_id, attempts, created_at) VALUES (gen_random_uuid(), %s, 'gate_user', 'pending', true, '{}',"
        " gen_random_uuid(), 0, now())",
        [req.id],
    )
    from api.models import WebhookDelivery, WebhookSubscriber
    from ops.models import Notification
    from retirements.models import Lifecycle, Workspace

    ws = Workspace.objects.create(
        slug="acme-old", name="Acme", lifecycle=Lifecycle.DISABLED, activated_at=clock.now(), created_at=clock.now()
    )
    hq = make_staff("hq-alice", *ALL_PERMS)
    retirement = retirement_request(actor=Actor.of(hq), slug=ws.slug, reason="contract ended", confirmation=ws.slug)
    # Every state a move may reach holds custody's constraints: held has its review date (held_at).
    type(retirement).objects.filter(id=retirement.id).update(held_at=clock.now())
    PurgeJob.objects.create(request=retirement, created_at=clock.now())
    rows = {
        type(req): req.id,
        StageHistory: StageHistory.objects.get(request_id=req.id).id,
        Workspace: ws.id,
        type(retirement): retirement.id,
        NoticeSlot: NoticeSlot.objects.filter(request=retirement).first().id,  # type: ignore[union-attr]
        RetirementWatcher: RetirementWatcher.objects.filter(request=retirement).first().id,  # type: ignore[union-attr]
        PurgeJob: PurgeJob.objects.get(request=retirement).id,
        Notification: Notification.objects.create(
            recipient=hq,
            key="test",
            event="approval_waiting",
            case_kind="deletion",
            case_id=req.id,
            subject="s",
            body="b",
            created_at=clock.now(),
        ).id,
        WebhookDelivery: WebhookDelivery.objects.create(
            subscriber=WebhookSubscriber.objects.create(
                name="s", url="http://x.invalid", secret="s", created_at=clock.now()
            ),
            event="deletion.approved",
            case_kind="deletion",
            case_id=req.id,
            payload={},
            created_at=clock.now(),
            next_attempt_at=clock.now(),
        ).id,
    }
    return rows


@pytest.mark.parametrize(("model", "name"), lifecycle_fields(), ids=lambda v: v if isinstance(v, str) else v.__name__)
def test_raw_updates_move_a_lifecycle_only_as_declared(model: type[Model], name: str, one_of_each) -> None:
    table, column = model._meta.db_table, fsm_field(model, name).column
    pk = one_of_each[model]
    states = [str(v) for v, _ in fsm_field(model, name).flatchoices]
    declared = set(declared_moves(model, name))
    claims = any(f.name == "claim_generation" for f in model._meta.fields)  # a claim takes the next generation
    says_why = any(f.name == "moved_because" for f in model._meta.fields)  # a suppression says why (its own)
    refused, accepted = [], []
    for source in states:
        for target in states:
            if source == target:
                continue
            _force(table, column, pk, source)
            claim = ", claim_generation = claim_generation + 1" if claims and target == "sending" else ""
            claim += f", moved_because = 'from {source}'" if says_why and target == "suppressed" else ""
            try:
                with transaction.atomic():
                    _raw(f'UPDATE "{table}" SET "{column}" = %s{claim} WHERE id = %s', [target, pk])
                accepted.append((source, target))
            except IntegrityError as exc:
                moved = f"{table}.{column} may not move from {source} to {target}"
                assert moved in str(exc) or "is evidence once final: never rewritten" in str(exc), exc
                refused.append((source, target))
    assert set(accepted) == declared, f"{label(model, name)}: accepted {sorted(set(accepted) - declared)} undeclared"
    assert refused, f"{label(model, name)}: no move was refused"
    assert len(refused) + len(accepted) == len(states) * (len(states) - 1)


def test_a_stage_attempt_outcome_is_final(one_of_each) -> None:
    stage = StageHistory.objects.get(id=one_of_each[StageHistory])
    _raw(
        "INSERT INTO entity_deletion_stage_attempts (request_id, stage_id, attempt, executor, generation, started_at,"
        " outcome, error) VALUES (%s, %s, 1, 'w', 1, now(), 'running', '')",
        [stage.request_id, stage.id],
    )
    _raw("UPDATE entity_deletion_stage_attempts SET outcome = 'failed' WHERE stage_id = %s", [stage.id])
    for outcome in ("running", "completed"):
        with pytest.raises(DatabaseError, match=r"Cannot update|a finished attempt is evidence"), transaction.atomic():
            _raw("UPDATE entity_deletion_stage_attempts SET outcome = %s WHERE stage_id = %s", [outcome, stage.id])
    assert StageAttempt.objects.get(stage=stage).outcome == "failed"


EDITS = {
    "un-revoke": "UPDATE entity_deletion_approvals SET revoked_at = NULL WHERE id = %s",
    "never expires": "UPDATE entity_deletion_approvals SET expires_at = NULL WHERE id = %s",
    "later expiry": "UPDATE entity_deletion_approvals SET expires_at = expires_at + interval '1 year' WHERE id = %s",
    "no inventory version": "UPDATE entity_deletion_approvals SET inventory_version = NULL WHERE id = %s",
    "no rules version": "UPDATE entity_deletion_approvals SET rules_version = NULL WHERE id = %s",
    "other digest": "UPDATE entity_deletion_approvals SET inventory_digest = repeat('f', 64) WHERE id = %s",
    "other approver": "UPDATE entity_deletion_approvals SET approved_by = 'someone' WHERE id = %s",
    "revoke again": "UPDATE entity_deletion_approvals SET revoked_at = revoked_at + interval '1 second' WHERE id = %s",
    "delete": "DELETE FROM entity_deletion_approvals WHERE id = %s",
}


def test_approval_evidence_takes_one_revocation_and_no_other_edit() -> None:
    req = submit_and_approve()
    approval = DeletionApproval.objects.get(request_id=req.id)
    _raw("UPDATE entity_deletion_approvals SET revoked_at = now() WHERE id = %s", [approval.id])  # the one edit
    revoked = DeletionApproval.objects.get(id=approval.id)
    assert revoked.revoked_at is not None
    refused = {}
    for what, sql in EDITS.items():
        with pytest.raises(IntegrityError) as exc, transaction.atomic():
            _raw(sql, [approval.id])
        refused[what] = re.sub(r"\s+", " ", str(exc.value).splitlines()[0])
    after = DeletionApproval.objects.get(id=approval.id)
    assert (after.revoked_at, after.expires_at, after.inventory_digest) == (
        revoked.revoked_at,
        revoked.expires_at,
        revoked.inventory_digest,
    )
    assert set(refused) == set(EDITS)
    assert "never deleted" in refused["delete"] and "only revoked_at may be set, once" in refused["un-revoke"]


def test_an_approval_cannot_be_saved_without_an_expiry() -> None:
    req = submit_and_approve()
    approval = DeletionApproval.objects.get(request_id=req.id)
    with pytest.raises(IntegrityError, match="expires_at"), transaction.atomic():
        _raw(
            "INSERT INTO entity_deletion_approvals (id, request_id, approved_by, approved_at, inventory_digest,"
            " inventory_version, rules_version) VALUES (gen_random_uuid(), %s, 'x', now(), %s, 1, 1)",
            [req.id, approval.inventory_digest],
        )
    assert approval.expires_at > approval.approved_at + timedelta(hours=1)
    assert DeletionApproval.objects.filter(request_id=req.id).count() == 1
