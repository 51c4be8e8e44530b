"""Deletion requests, approvals and stage history.

Table and column names are fixed by the operators' runbook SQL (SPEC 3.1).
"""

import re
import uuid
from urllib.parse import urlsplit

import pgtrigger
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q
from django.utils import timezone
from django_fsm import FSMField, FSMModelMixin, transition

from core.custody import NamesWhoMayAct
from core.decisions import DecisionRecord
from core.lifecycle import (
    AppendOnly,
    DeletedOnlyByRetention,
    EvidenceOnceFinal,
    FSMGuard,
    SetOnce,
    SettledOnce,
    closed_by_a_named_decision,
)
from deletions.contract import AFTER_WITHDRAWAL, FAULT_ALARMS, MANUAL_PREFIX, ROTA_PERMISSION, WAITING_ON_PEOPLE
from wire import bounds


class Status(models.TextChoices):
    SUBMITTED = "submitted", "Waiting for approval"
    APPROVED = "approved", "Approved, not started"
    RUNNING = "running", "Running"
    RETRY_WAIT = "retry_wait", "Waiting to retry"
    NEEDS_ATTENTION = "needs_attention", "Needs attention"
    NEEDS_REVIEW = "needs_review", "Back in review"
    COMPLETED = "completed", "Completed"
    CANCELLED = "cancelled", "Cancelled"


OPEN_STATUSES = [
    Status.SUBMITTED,
    Status.APPROVED,
    Status.RUNNING,
    Status.RETRY_WAIT,
    Status.NEEDS_ATTENTION,
    Status.NEEDS_REVIEW,
]
TERMINAL_STATUSES = [Status.COMPLETED, Status.CANCELLED]
RUNNABLE_STATUSES = [Status.APPROVED, Status.RUNNING, Status.RETRY_WAIT]

_FAULTS_SQL = ", ".join(f"'{kind}'" for kind in FAULT_ALARMS)


def _named_to(rotas: list[str], statuses: list[str]) -> Q:
    """The case is named (`assigned_for`) for the state it is in, one of `statuses`, to one of `rotas`."""
    return Q(*[Q(status=s, assigned_for__in=[f"{s}:{r}" for r in rotas]) for s in statuses], _connector=Q.OR)


# A case waiting on people has a next check (a retry the effect of which is unknown included).
WAITS_ON_PEOPLE = Q(status__in=WAITING_ON_PEOPLE) | (Q(status=Status.RETRY_WAIT) & ~Q(open_question=""))


class DeletionRequest(FSMModelMixin, models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    entity_type = models.CharField(max_length=32, default="user")
    target = models.CharField(max_length=255)
    requested_by = models.CharField(max_length=150)
    # The seed's text column keeps the username (runbook SQL); the key says who it is.
    requested_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    inventory_json = models.JSONField()
    inventory_version = models.IntegerField()
    inventory_digest = models.CharField(max_length=64)
    status = FSMField(default=Status.SUBMITTED, choices=Status.choices, protected=True, max_length=32)
    lease_owner = models.CharField(max_length=200, null=True, blank=True)
    lease_generation = models.BigIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    retry_count = models.IntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # The case (SPEC 5.1): who holds it, when it is looked at next, what is open.
    owner = models.CharField(max_length=150, blank=True, default="")
    next_check_at = models.DateTimeField(null=True, blank=True)
    open_question = models.TextField(blank=True, default="")
    last_action = models.TextField(blank=True, default="")
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_by = models.CharField(max_length=150, blank=True, default="")
    cancel_reason = models.TextField(blank=True, default="")
    # Custody (SPEC 5.5): the named person and backup while the case waits on people, and the
    # state and rota they were named for (`status:rota`): a case that moves on is named again.
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    backup = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    assigned_for = models.CharField(max_length=80, blank=True, default="")
    # The legal deadline: received (intake may say earlier than submission), and due by.
    received_at = models.DateTimeField()
    due_at = models.DateTimeField()

    class Meta:
        db_table = "entity_deletion_requests"
        constraints = [
            models.UniqueConstraint(
                fields=["entity_type", "target"],
                condition=Q(status__in=OPEN_STATUSES),
                name="one_open_deletion_per_target",
            ),
            # Custody (SPEC 5.5): the backup is another person than the one who holds the case.
            models.CheckConstraint(
                condition=Q(assignee__isnull=True) | Q(backup__isnull=True) | ~Q(assignee=F("backup")),
                name="deletion_backup_is_another_person",
            ),
            # A case waiting on people is looked at again by a set time.
            models.CheckConstraint(
                condition=~WAITS_ON_PEOPLE | Q(next_check_at__isnull=False), name="deletion_waiting_has_a_next_check"
            ),
            # Named by a rota for the state it is in: a person and a backup, both (who may act: the trigger).
            models.CheckConstraint(
                condition=~_named_to(list(ROTA_PERMISSION), [str(s) for s in OPEN_STATUSES])
                | Q(assignee__isnull=False, backup__isnull=False),
                name="deletion_named_case_has_person_and_backup",
            ),
            # A case waiting on people is never the system's to hold.
            models.CheckConstraint(
                condition=~_named_to(["system"], list(WAITING_ON_PEOPLE)),
                name="deletion_waiting_case_is_held_by_people",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="deletion_status_due"),
            # The console's default order (newest first, id to break ties), whole or by status.
            models.Index(fields=["-created_at", "-id"], name="deletion_newest"),
            models.Index(fields=["status", "-created_at", "-id"], name="deletion_status_newest"),
            # Waiting for me (person or backup), and the deadline column's order, open cases only.
            models.Index(fields=["assignee"], condition=Q(status__in=OPEN_STATUSES), name="deletion_open_assignee"),
            models.Index(fields=["backup"], condition=Q(status__in=OPEN_STATUSES), name="deletion_open_backup"),
            models.Index(fields=["due_at", "id"], name="deletion_due"),
            # The list's sorts, each read both ways (core.admin.OneIndexPerSort): the column, then newest first.
            models.Index(fields=["next_check_at", "-created_at", "-id"], name="deletion_next_check"),
            models.Index(fields=["due_at", "-created_at", "-id"], name="deletion_by_deadline"),
            # The work waiting (ops.health): how many need a person, and since when the oldest.
            models.Index(
                fields=["updated_at"], condition=Q(status="needs_attention"), name="deletion_needing_attention"
            ),
        ]
        triggers = [
            FSMGuard(name="status_moves_as_declared", field="status"),
            DeletedOnlyByRetention(name="deleted_only_by_retention"),
            # The proposal an approval covers never changes, whatever writes the row.
            pgtrigger.Protect(
                name="proposal_is_immutable",
                operation=pgtrigger.Update,
                condition=pgtrigger.AnyChange("inventory_json", "inventory_digest", "inventory_version", "target"),
            ),
            # Custody: the person and backup may act for the rota they are named for, never the submitter.
            NamesWhoMayAct(
                name="custody_names_who_may_act",
                person="assignee_id",
                backup="backup_id",
                rotas=ROTA_PERMISSION,
                key="assigned_for",
                barred="requested_by_user_id",
            ),
            # An open fault (an integrity alarm, an effect applied after withdrawal) stops approval and
            # completion; a case with an effect applied by hand after withdrawal never completes.
            pgtrigger.Trigger(
                name="no_approval_or_completion_past_a_fault",
                when=pgtrigger.Before,
                operation=pgtrigger.Update,
                condition=pgtrigger.Condition(
                    "NEW.status IS DISTINCT FROM OLD.status AND NEW.status IN ('approved', 'completed')"
                ),
                declare=[("fault", "text")],
                func=(
                    "SELECT a.kind INTO fault FROM entity_deletion_alarms a WHERE a.request_id = NEW.id "
                    f"AND a.kind IN ({_FAULTS_SQL}) AND a.resolved_at IS NULL ORDER BY a.created_at LIMIT 1; "
                    "IF fault IS NOT NULL THEN RAISE EXCEPTION "
                    "'deletion %: an open % alarm stops it from being %; a person closes it with a reason first', "
                    "NEW.id, fault, NEW.status USING ERRCODE = '23514'; END IF; "
                    "IF NEW.status = 'completed' AND EXISTS (SELECT 1 FROM entity_deletion_alarms a "
                    f"WHERE a.request_id = NEW.id AND a.kind = '{AFTER_WITHDRAWAL}') THEN RAISE EXCEPTION "
                    "'deletion %: an effect was applied by hand after its approval was withdrawn: such a case is "
                    "cancelled, never completed', NEW.id USING ERRCODE = '23514'; END IF; RETURN NEW;"
                ),
            ),
        ]
        permissions = [
            ("submit_deletionrequest", "Can submit a deletion request"),
            ("approve_deletionrequest", "Can approve a deletion request"),
            ("cancel_deletionrequest", "Can cancel a deletion request"),
            ("run_deletionrequest", "Can run or resume a deletion request"),
            ("assign_deletionrequest", "Can assign a deletion case to someone"),
            ("extend_deadline_deletionrequest", "Can extend a deletion request's deadline"),
        ]

    def __str__(self) -> str:
        return f"{self.target} ({self.get_status_display().lower()})"  # as breadcrumbs and messages read

    # Lifecycle: transitions change only the row; callers lock it first.
    @transition(field=status, source=[Status.SUBMITTED, Status.NEEDS_REVIEW], target=Status.APPROVED)
    def approve(self) -> None:
        pass

    @transition(field=status, source=Status.APPROVED, target=Status.SUBMITTED)
    def return_to_review(self) -> None:
        pass

    @transition(field=status, source=Status.APPROVED, target=Status.RUNNING)
    def start(self) -> None:
        pass

    @transition(field=status, source=[Status.RUNNING, Status.RETRY_WAIT], target=Status.RETRY_WAIT)
    def wait_for_retry(self) -> None:
        pass

    @transition(field=status, source=[Status.RUNNING, Status.RETRY_WAIT], target=Status.NEEDS_ATTENTION)
    def escalate(self) -> None:
        pass

    @transition(field=status, source=Status.RETRY_WAIT, target=Status.RUNNING)
    def retry(self) -> None:
        pass

    @transition(field=status, source=[Status.APPROVED, Status.RUNNING, Status.RETRY_WAIT], target=Status.NEEDS_REVIEW)
    def refuse_at_boundary(self) -> None:
        """The receiver refused an effect for want of authority: back to review."""

    @transition(field=status, source=Status.APPROVED, target=Status.RUNNING)
    def resume_approved(self) -> None:
        """A fresh approval of a started request: the saved stage continues."""

    @transition(field=status, source=Status.NEEDS_ATTENTION, target=Status.RETRY_WAIT)
    def operator_resume(self) -> None:
        pass

    @transition(field=status, source=Status.RUNNING, target=Status.COMPLETED)
    def complete(self) -> None:
        pass

    @transition(field=status, source=OPEN_STATUSES, target=Status.CANCELLED)
    def cancel(self) -> None:
        pass


# The order that makes an approval a request's latest (the one in force): the store, the runs'
# first read and the proposal all take the first approval in it; the store's SQL reads spell it
# as LATEST_APPROVAL_SQL, made from it.
LATEST_APPROVAL_FIRST = ("-approved_at", "-id")
LATEST_APPROVAL_SQL = ", ".join(
    f"{name.lstrip('-')} {'DESC' if name.startswith('-') else 'ASC'}" for name in LATEST_APPROVAL_FIRST
)


class DeletionApproval(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    request = models.ForeignKey(DeletionRequest, on_delete=models.PROTECT, related_name="approvals")
    approved_by = models.CharField(max_length=150)
    approved_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    approved_at = models.DateTimeField()
    # The exact proposal covered: the digest, and the inventory and rules versions it was read under.
    inventory_digest = models.CharField(max_length=64)
    inventory_version = models.IntegerField()
    rules_version = models.IntegerField()
    expires_at = models.DateTimeField()  # every approval expires
    revoked_at = models.DateTimeField(null=True, blank=True)
    # What the approver saw at the target system, per community ({id: {rows, agents, version}}): each
    # effect's grant expects that data version, so a source changed since approval is refused where
    # it lands, and the case shows the approved counts beside what was deleted.
    preview = models.JSONField(default=dict)

    class Meta:
        db_table = "entity_deletion_approvals"
        # Evidence: an approval is never deleted or rewritten; it can only be revoked, once.
        triggers = [SetOnce(name="approval_is_evidence", column="revoked_at")]

    def __str__(self) -> str:
        return f"approval by {self.approved_by} of {self.inventory_digest[:12]}"


class StageStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


class StageHistory(FSMModelMixin, models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    request = models.ForeignKey(DeletionRequest, on_delete=models.PROTECT, related_name="stages")
    stage = models.CharField(max_length=64)
    target_community_id = models.UUIDField(null=True, blank=True)
    status = FSMField(default=StageStatus.PENDING, choices=StageStatus.choices, protected=True, max_length=16)
    is_current = models.BooleanField(default=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    metadata_json = models.JSONField(default=dict)
    last_error = models.TextField(null=True, blank=True)
    # Saved before the effect is first submitted; every retry of this row reuses it.
    operation_id = models.UUIDField(default=uuid.uuid4, unique=True)
    # Set just before the effect is first submitted: from then on the effect is
    # unknown until the target system's record (or an operator) settles it.
    submitted_at = models.DateTimeField(null=True, blank=True)
    attempts = models.IntegerField(default=0)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "entity_deletion_stage_history"
        constraints = [
            models.UniqueConstraint(
                fields=["request"], condition=Q(is_current=True), name="one_current_stage_per_request"
            ),
        ]
        triggers = [
            FSMGuard(name="status_moves_as_declared", field="status"),
            # A completed stage's result, operation id and times are evidence: the store only retires
            # it (is_current off, the rules' decision added once); retention only drops its result.
            EvidenceOnceFinal(
                name="completed_stage_is_evidence",
                what="a completed stage",
                final="OLD.status = 'completed'",
                allowed=(
                    "(to_jsonb(NEW) - 'is_current' - 'metadata_json')"
                    " = (to_jsonb(OLD) - 'is_current' - 'metadata_json')"
                    " AND (NEW.is_current = OLD.is_current OR NOT NEW.is_current)"
                    " AND (NEW.metadata_json - 'decision') = (OLD.metadata_json - 'decision')"
                    " AND (NOT OLD.metadata_json ? 'decision'"
                    " OR NEW.metadata_json -> 'decision' = OLD.metadata_json -> 'decision')"
                ),
                retained=(
                    "(to_jsonb(NEW) - 'metadata_json') = (to_jsonb(OLD) - 'metadata_json')"
                    " AND NEW.metadata_json = OLD.metadata_json - 'result'"
                ),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.stage} {self.target_community_id or ''} ({self.status})"

    # A retried row runs again; a worker that died mid-stage leaves it running for the next one.
    @transition(
        field=status, source=[StageStatus.PENDING, StageStatus.FAILED, StageStatus.RUNNING], target=StageStatus.RUNNING
    )
    def run(self) -> None:
        pass

    @transition(field=status, source=StageStatus.RUNNING, target=StageStatus.PENDING)
    def set_aside(self) -> None:
        """Refused at the receiver: nothing was applied, and it is not a failure."""

    @transition(field=status, source=StageStatus.RUNNING, target=StageStatus.COMPLETED)
    def succeed(self) -> None:
        pass

    @transition(field=status, source=StageStatus.RUNNING, target=StageStatus.FAILED)
    def fail(self) -> None:
        pass


class DeletionDecision(DecisionRecord):
    """Who decided what about a request, why and when (the shape both workflows share)."""

    request = models.ForeignKey(DeletionRequest, on_delete=models.PROTECT, related_name="decisions")
    approval = models.ForeignKey(
        DeletionApproval, null=True, blank=True, on_delete=models.PROTECT, related_name="+", help_text="acted under"
    )

    class Meta(DecisionRecord.Meta):
        db_table = "entity_deletion_decisions"


class DeletionAlarm(models.Model):
    """An owner alerted: a case that waits on a person (effect unknown). Cleared when settled; a
    fault (`FAULT_ALARMS`) only by a person's decision with a reason, which it then names."""

    request = models.ForeignKey(DeletionRequest, on_delete=models.PROTECT, related_name="alarms")
    kind = models.CharField(max_length=32)
    message = models.TextField()
    created_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    decision = models.ForeignKey(  # read from the alarm only (a decision closes at most a few)
        DeletionDecision,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
        help_text="the decision that closed it (who, when and why)",
    )

    class Meta:
        db_table = "entity_deletion_alarms"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["request", "kind"], condition=Q(resolved_at__isnull=True), name="one_open_deletion_alarm"
            ),
        ]
        triggers = [
            # A record of what happened: resolved once (with the decision that closed it), never rewritten.
            SettledOnce(name="resolved_once", what="an alarm", column="resolved_at", prefixes=("resolved", "decision")),
            # A fault closes only with a person's close_alarm decision on the same case, with a reason.
            closed_by_a_named_decision(
                name="a_fault_closes_by_a_named_decision", decisions="entity_deletion_decisions", kinds=FAULT_ALARMS
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


class AuthorityWithdrawal(models.Model):
    """Authority over a request withdrawn (its approval revoked, the request cancelled): an outbox
    entry, pushed to the target system until it acknowledges the new minimum epoch. From then on
    the target refuses a grant minted before it; until then such a grant can still land."""

    request = models.ForeignKey(  # indexed by one_withdrawal_per_epoch (request, epoch)
        DeletionRequest, on_delete=models.PROTECT, related_name="withdrawals", db_index=False
    )
    epoch = models.BigIntegerField()
    cause = models.TextField()
    created_at = models.DateTimeField()
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_where = models.TextField(blank=True, default="")
    attempts = models.IntegerField(default=0)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        db_table = "entity_deletion_authority_withdrawals"
        constraints = [models.UniqueConstraint(fields=["request", "epoch"], name="one_withdrawal_per_epoch")]
        # Once the target acknowledged it, what was withdrawn, when and where is evidence.
        triggers = [
            EvidenceOnceFinal(
                name="acknowledged_withdrawal_is_evidence",
                what="an acknowledged withdrawal",
                final="OLD.acknowledged_at IS NOT NULL",
                allowed="false",
            )
        ]
        indexes = [
            models.Index(
                fields=["created_at"], condition=Q(acknowledged_at__isnull=True), name="withdrawal_unacknowledged"
            )
        ]

    def __str__(self) -> str:
        return f"epoch {self.epoch}: {self.cause}"


class OperatorRecord(models.Model):
    """What an operator recorded for an effect applied by hand at a target that cannot enforce
    anything itself (a `manual:` target): applied, with the evidence they saw, or not applied.
    The manual target's lookup reads these; append-only (the latest record for an operation counts).

    A record is final: one per hand-over of the effect (`attempt`, the stage's attempt that handed
    it over; "not applied" hands it over again, as a new attempt), and an effect recorded applied is
    recorded so once. A correction is a new record linked to the one it corrects (`corrects`), made
    by an approver who did not make that record; both are kept."""

    request = models.ForeignKey(DeletionRequest, on_delete=models.PROTECT, related_name="operator_records")
    operation_id = models.UUIDField()
    stage = models.CharField(max_length=32)
    applied = models.BooleanField()
    has_agents = models.BooleanField(null=True, blank=True)  # purge_db: the branch the rules take
    evidence = models.TextField()
    recorded_by = models.CharField(max_length=150)
    recorded_at = models.DateTimeField()
    attempt = models.IntegerField(null=True, blank=True, help_text="the hand-over it answers (none before 51)")
    corrects = models.OneToOneField("self", null=True, blank=True, on_delete=models.PROTECT, related_name="correction")

    class Meta:
        db_table = "entity_deletion_operator_records"
        indexes = [models.Index(fields=["operation_id", "-recorded_at"], name="operator_record_latest")]
        constraints = [
            models.UniqueConstraint(
                fields=["operation_id", "attempt"], condition=Q(corrects__isnull=True), name="one_record_per_handover"
            ),
            models.UniqueConstraint(
                fields=["operation_id"], condition=Q(applied=True, corrects__isnull=True), name="applied_recorded_once"
            ),
        ]
        triggers = [
            AppendOnly(name="operator_records_append_only"),
            # A correction is of a record of the same operation on the same case, by someone else.
            pgtrigger.Trigger(
                name="a_correction_is_another_persons",
                when=pgtrigger.Before,
                operation=pgtrigger.Insert,
                condition=pgtrigger.Condition("NEW.corrects_id IS NOT NULL"),
                func=(
                    "IF NOT EXISTS (SELECT 1 FROM entity_deletion_operator_records o WHERE o.id = NEW.corrects_id "
                    "AND o.request_id = NEW.request_id AND o.operation_id = NEW.operation_id "
                    "AND o.recorded_by <> NEW.recorded_by) THEN RAISE EXCEPTION "
                    "'%: a correction names a record of the same operation, made by another person', TG_TABLE_NAME "
                    "USING ERRCODE = '23514'; END IF; RETURN NEW;"
                ),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.operation_id}: {'applied' if self.applied else 'not applied'} by {self.recorded_by}"


class LeaseEvent(models.Model):
    """Every claim and release: the lease generation history of a request."""

    request = models.ForeignKey(  # indexed by lease_event_request_gen (request, generation)
        DeletionRequest, on_delete=models.PROTECT, related_name="lease_events", db_index=False
    )
    event = models.CharField(max_length=16)  # claim | takeover | release
    owner = models.CharField(max_length=200)
    generation = models.BigIntegerField()
    previous_owner = models.CharField(max_length=200, null=True, blank=True)
    previous_expires_at = models.DateTimeField(null=True, blank=True)
    at = models.DateTimeField()

    class Meta:
        db_table = "entity_deletion_lease_events"
        indexes = [models.Index(fields=["request", "generation"], name="lease_event_request_gen")]
        triggers = [AppendOnly(name="lease_events_append_only")]

    def __str__(self) -> str:
        return f"{self.event} by {self.owner} (generation {self.generation})"


FAILED_OUTCOMES = ("failed", "effect_unknown")  # an attempt that did not do its stage's effect (or may not have)


class StageAttempt(models.Model):
    """One attempt at a stage: who ran it under which generation, and how it ended.
    Written by the store with the stage's own writes, so a failure never disappears
    behind a later success."""

    class Outcome(models.TextChoices):
        RUNNING = "running", "running"
        COMPLETED = "completed", "completed"
        FAILED = "failed", "failed"
        EFFECT_UNKNOWN = "effect_unknown", "effect unknown"
        REFUSED = "refused", "refused at the receiving boundary"
        INTERRUPTED = "interrupted", "interrupted (worker stopped or lost)"

    FAILED_OUTCOMES = FAILED_OUTCOMES

    request = models.ForeignKey(DeletionRequest, on_delete=models.PROTECT, related_name="attempts")
    stage = models.ForeignKey(  # indexed by one_row_per_stage_attempt (stage, attempt)
        StageHistory, on_delete=models.PROTECT, related_name="attempt_rows", db_index=False
    )
    attempt = models.IntegerField()
    executor = models.CharField(max_length=200)
    generation = models.BigIntegerField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.RUNNING)
    error = models.TextField(blank=True, default="")

    class Meta:
        db_table = "entity_deletion_stage_attempts"
        constraints = [models.UniqueConstraint(fields=["stage", "attempt"], name="one_row_per_stage_attempt")]
        indexes = [  # the list's "failed this week": the few failed attempts, not all of them
            models.Index(fields=["-started_at"], condition=Q(outcome__in=FAILED_OUTCOMES), name="attempt_failed")
        ]
        # An attempt's outcome is a state: running, then one final outcome that never changes.
        triggers = [
            pgtrigger.Protect(
                name="outcome_is_final",
                operation=pgtrigger.Update,
                condition=pgtrigger.Condition("OLD.outcome <> 'running' AND NEW.outcome IS DISTINCT FROM OLD.outcome"),
            ),
            # A finished attempt is evidence: only an interrupted one's empty error may be filled,
            # once (what a worker whose lease was taken over met at the receiver afterwards).
            EvidenceOnceFinal(
                name="finished_attempt_is_evidence",
                what="a finished attempt",
                final="OLD.outcome <> 'running'",
                allowed=(
                    "(to_jsonb(NEW) - 'error') = (to_jsonb(OLD) - 'error')"
                    " AND (NEW.error = OLD.error OR (OLD.outcome = 'interrupted' AND OLD.error = ''))"
                ),
            ),
        ]

    def __str__(self) -> str:
        return f"attempt {self.attempt} by {self.executor} (generation {self.generation}): {self.outcome}"


KEY_PATTERN = r"^[A-Za-z0-9_-]{43}$"  # an Ed25519 public key: 32 bytes, unpadded base64url

# The key id a saved receipt (a compact JWS, in a completed stage's result) names in its header.
_RECEIPT = "s.metadata_json -> 'result' ->> 'receipt'"
_HEADER = f"split_part({_RECEIPT}, '.', 1)"
_RECEIPT_KID = (
    f"convert_from(decode(rpad(translate({_HEADER}, '-_', '+/'), (length({_HEADER}) + 3) / 4 * 4, '='), "
    "'base64'), 'UTF8')::jsonb ->> 'kid'"
)
# A registered receiver's key stays as it is while evidence of a target under its prefix cites it.
_CITED_KEYS_ARE_KEPT = (
    "IF TG_OP = 'UPDATE' AND NEW.keys = OLD.keys AND NEW.prefix = OLD.prefix THEN RETURN NEW; END IF; "
    "FOR kid IN SELECT k FROM jsonb_object_keys(OLD.keys) AS k LOOP "
    "CONTINUE WHEN TG_OP = 'UPDATE' AND NEW.prefix = OLD.prefix AND NEW.keys -> kid = OLD.keys -> kid; "
    "IF EXISTS (SELECT 1 FROM public.entity_deletion_requests r "
    "JOIN public.entity_deletion_stage_history s ON s.request_id = r.id "
    f"WHERE starts_with(r.target, OLD.prefix) AND s.metadata_json -> 'result' ? 'receipt' AND {_RECEIPT_KID} = kid) "
    "THEN RAISE EXCEPTION '%: key % of % is cited by saved evidence: it is never rewritten or retired', "
    "TG_TABLE_NAME, kid, OLD.prefix USING ERRCODE = '23514'; END IF; "
    "END LOOP; "
    "IF TG_OP = 'DELETE' THEN RETURN OLD; END IF; RETURN NEW;"
)


class TargetSystem(models.Model):
    """A receiver the back-office sends effects to over HTTP (`deletions.targets.http`): a target whose
    name starts with `prefix` is deleted there. Its keys are the receiver's public keys, by key id: its
    evidence is believed only when signed by one of them (an old key stays while evidence it signed is kept)."""

    name = models.CharField(max_length=100, unique=True)
    prefix = models.CharField(
        max_length=40,
        unique=True,
        validators=[
            RegexValidator(r"^[a-z][a-z0-9_-]{0,38}:$", "a prefix is lower-case letters, digits, _ or -, then :")
        ],
    )
    base_url = models.URLField(
        max_length=300,
        validators=[RegexValidator(r"/receiver/v1/$", "the receiver's URL ends with /receiver/v1/")],
    )
    keys = models.JSONField()  # key id -> public key; checked by clean()
    connect_timeout_seconds = models.FloatField(default=2.0, validators=[MinValueValidator(0.1), MaxValueValidator(60)])
    # The default: a receiver's default bound on a call plus the margin (`wire.bounds`, the one rule).
    read_timeout_seconds = models.FloatField(
        default=bounds.READ_TIMEOUT_SECONDS, validators=[MinValueValidator(0.1), MaxValueValidator(600)]
    )
    registered_at = models.DateTimeField(default=timezone.now)
    # Since when the receiver has not answered (a worker could not read its fence, health's discovery
    # got no answer or one under a key not registered here), kept until it answers again: what the case
    # page, the overview and health say (`store.receivers`).
    unanswered_since = models.DateTimeField(null=True, blank=True, editable=False)
    unanswered_reason = models.TextField(blank=True, default="", editable=False)
    # What the receiver's database has applied, as far as the back-office holds its signed evidence: its
    # incarnation and the highest operation number seen (noted where evidence is believed, never lowered but
    # by a finished re-application, `store.receivers`). A receiver that reports less went back in time.
    state_incarnation = models.CharField(max_length=64, blank=True, default="", editable=False)
    state_applied = models.BigIntegerField(default=0, editable=False)

    class Meta:
        db_table = "registered_receivers"  # (the case database holds no table of a target's data)
        ordering = ["prefix"]
        # A key is added or retired, never rewritten: while saved evidence cites a key id, its key
        # never changes and it never disappears (nor its prefix, nor the row).
        triggers = [
            pgtrigger.Trigger(
                name="cited_keys_are_kept",
                when=pgtrigger.Before,
                operation=pgtrigger.Update | pgtrigger.Delete,
                declare=[("kid", "text")],
                func=_CITED_KEYS_ARE_KEPT,
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix})"

    def clean(self) -> None:
        """Not the manual target system's prefix (its targets never reach a receiver); a URL without a user
        name or password (calls are signed; a secret in it would be shown wherever the URL is); key id ->
        public key, at least one, each key 32 bytes of unpadded base64url."""
        if self.prefix == MANUAL_PREFIX:
            said = f"{MANUAL_PREFIX} is the back-office's own, for systems a person deletes in by hand: use another"
            raise ValidationError({"prefix": said})
        if "@" in urlsplit(str(self.base_url or "")).netloc:
            said = "the URL carries a user name or password: give it without (calls are signed; no secrets in URLs)"
            raise ValidationError({"base_url": said})
        if not isinstance(self.keys, dict) or not self.keys:
            raise ValidationError({"keys": 'the receiver\'s keys: {"key id": "public key"}, at least one'})
        for kid, key in self.keys.items():
            if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", str(kid)) or not re.fullmatch(KEY_PATTERN, str(key)):
                raise ValidationError(
                    {"keys": f"key {str(kid)[:64]!r}: an id of letters, digits, . _ - and a 43-character key"}
                )


class DeletionReapplication(models.Model):
    """A completed stage's effect applied again because its receiver's database went back in time (a
    restore from a backup taken before it) and no longer knows the operation: the new operation, sent
    under the original approval's authority, and what came of it (`answer`, set once: the receiver's
    signed evidence with its receipt, or why a person was handed it instead). One per first operation."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    request = models.ForeignKey(DeletionRequest, on_delete=models.PROTECT, related_name="reapplications")
    stage_id = models.UUIDField()  # the completed stage whose effect this is again
    first_operation_id = models.UUIDField(unique=True)
    operation_id = models.UUIDField(unique=True)
    generation = models.BigIntegerField()
    because = models.TextField()  # the receiver's rewind, in words
    created_at = models.DateTimeField()
    # {"outcome": "applied" | "handed", "at": ..., "evidence": {...} (with its receipt) | "said": "..."}
    answer = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "entity_deletion_reapplications"
        ordering = ["created_at"]
        triggers = [SetOnce(name="reapplication_answered_once", column="answer")]

    def __str__(self) -> str:
        return f"re-application of {self.first_operation_id} as {self.operation_id}"
