"""Workspaces and their retirement: requests, notice slots, watchers, purge jobs, decisions."""

import uuid
from typing import Any

import pgtrigger
from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django_fsm import FSMField, FSMModelMixin, transition

from core.custody import NamesWhoMayAct
from core.decisions import DecisionRecord
from core.lifecycle import (
    ClaimFence,
    DeletedOnlyByRetention,
    EvidenceOnceFinal,
    FSMGuard,
    SettledOnce,
    closed_by_a_named_decision,
)
from retirements.contract import CLOSED_BY_A_PERSON


class Lifecycle(models.TextChoices):
    ACTIVE = "active"
    DISABLED = "disabled"
    DELETION_PENDING = "deletion_pending"
    DELETING = "deleting"
    DELETED = "deleted"


class Workspace(FSMModelMixin, models.Model):
    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    lifecycle = FSMField(default=Lifecycle.ACTIVE, choices=Lifecycle.choices, protected=True, max_length=32)
    activated_at = models.DateTimeField(null=True, blank=True, help_text="null when never activated")
    legal_hold = models.BooleanField(default=False)
    protected_reason = models.CharField(max_length=200, blank=True, default="")
    is_disposable_test = models.BooleanField(default=False)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["slug"]
        # The list's filters and sorts, each in the list's order (by slug): no full scan.
        indexes = [
            # A deep page reads its ids first (core.admin.EstimatedCountPaginator): from this index alone.
            models.Index(fields=["slug"], include=["id"], name="workspace_pages"),
            models.Index(fields=["lifecycle", "slug"], name="workspace_lifecycle"),
            models.Index(fields=["name", "slug"], name="workspace_by_name"),
            models.Index(fields=["legal_hold", "slug"], name="workspace_legal_hold"),
            models.Index(fields=["is_disposable_test", "slug"], name="workspace_disposable"),
        ]
        triggers = [
            FSMGuard(name="lifecycle_moves_as_declared", field="lifecycle"),
            DeletedOnlyByRetention(name="deleted_only_by_retention"),  # (which keeps workspaces: never)
        ]
        permissions = [("protect_workspace", "Can set or lift a workspace's legal hold or protection")]

    def __str__(self) -> str:
        return self.slug

    @transition(field=lifecycle, source=Lifecycle.DISABLED, target=Lifecycle.DELETION_PENDING)
    def mark_deletion_pending(self) -> None:
        pass

    @transition(field=lifecycle, source=Lifecycle.DELETION_PENDING, target=Lifecycle.DISABLED)
    def restore_disabled(self) -> None:
        pass

    @transition(field=lifecycle, source=Lifecycle.DELETION_PENDING, target=Lifecycle.DELETING)
    def begin_deleting(self) -> None:
        pass

    @transition(field=lifecycle, source=Lifecycle.DELETING, target=Lifecycle.DISABLED)
    def restore_after_refused_purge(self) -> None:
        """Staff closed a request whose purge the boundary refused: nothing was purged."""

    @transition(field=lifecycle, source=Lifecycle.DELETING, target=Lifecycle.DELETED)
    def mark_deleted(self) -> None:
        pass


class RequestStatus(models.TextChoices):
    WAITING = "waiting", "Waiting period"
    HELD = "held", "On hold"
    EXECUTING = "executing", "Executing purge"
    COMPLETED = "completed", "Completed (workspace deleted)"
    CANCELLED = "cancelled", "Cancelled"
    CLOSED = "closed", "Closed without purge"


OPEN_REQUEST_STATUSES = [RequestStatus.WAITING, RequestStatus.HELD, RequestStatus.EXECUTING]
# Who may own or back up a retirement: the operators allowed to hold one (the rota and the database agree).
HOLD_PERMISSION = "retirements.hold_retirementrequest"


class RetirementRequest(FSMModelMixin, models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="retirements")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    reason = models.TextField()
    confirmation = models.CharField(max_length=100)
    status = FSMField(default=RequestStatus.WAITING, choices=RequestStatus.choices, protected=True, max_length=32)
    requested_at = models.DateTimeField()
    eligible_at = models.DateTimeField()
    eligibility_policy = models.CharField(max_length=32)
    watcher = models.ForeignKey(
        "RetirementWatcher",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="the authoritative watcher",
    )
    next_wake_at = models.DateTimeField(null=True, blank=True)
    held_at = models.DateTimeField(null=True, blank=True)
    held_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    hold_reason = models.TextField(blank=True, default="")
    cancelled_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    cancel_reason = models.TextField(blank=True, default="")
    concluded_at = models.DateTimeField(null=True, blank=True)
    conclusion = models.TextField(blank=True, default="")
    blocker = models.TextField(blank=True, default="")
    blocked_until = models.DateTimeField(null=True, blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # Custody (SPEC 5.5): who covers for the owner, from the operators' rota.
    backup = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    last_action = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField()

    class Meta:
        triggers = [
            FSMGuard(name="status_moves_as_declared", field="status"),
            DeletedOnlyByRetention(name="deleted_only_by_retention"),
            # Custody: the owner and backup of an open case are people who may hold retirements.
            NamesWhoMayAct(
                name="custody_names_who_may_act",
                person="owner_id",
                backup="backup_id",
                perm=HOLD_PERMISSION,
                rota="operators on call",
                open=tuple(OPEN_REQUEST_STATUSES),
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace"],
                condition=Q(status__in=OPEN_REQUEST_STATUSES),
                name="one_open_retirement_per_workspace",
            ),
            # Custody (SPEC 5.5): the backup is another person than the owner.
            models.CheckConstraint(
                condition=Q(owner__isnull=True) | Q(backup__isnull=True) | ~Q(owner=F("backup")),
                name="retirement_backup_is_another_person",
            ),
            # An open case has a person who holds it; one on hold (waiting on people) a backup too,
            # and its review date (its next check: when it was held, plus the hold's limit).
            models.CheckConstraint(
                condition=~Q(status__in=OPEN_REQUEST_STATUSES) | Q(owner__isnull=False),
                name="retirement_open_case_has_an_owner",
            ),
            models.CheckConstraint(
                condition=~Q(status=RequestStatus.HELD) | Q(backup__isnull=False, held_at__isnull=False),
                name="retirement_held_case_has_a_backup_and_a_review",
            ),
        ]
        indexes = [
            # the watcher's due batch, read in its order (`selectors.sql` due_batch)
            models.Index(fields=["status", "next_wake_at", "id"], name="retirement_status_wake"),
            models.Index(fields=["-requested_at", "-id"], name="retirement_newest"),
            models.Index(
                fields=["eligible_at", "-requested_at", "-id"], name="retirement_eligible"
            ),  # the list's sorts
            models.Index(fields=["next_wake_at", "-requested_at", "-id"], name="retirement_next_wake"),
            models.Index(fields=["status", "-requested_at", "-id"], name="retirement_status_newest"),
            models.Index(fields=["eligibility_policy", "-requested_at", "-id"], name="retirement_policy_newest"),
            models.Index(fields=["owner"], condition=Q(status__in=OPEN_REQUEST_STATUSES), name="retirement_open_owner"),
            models.Index(
                fields=["backup"], condition=Q(status__in=OPEN_REQUEST_STATUSES), name="retirement_open_backup"
            ),
        ]
        permissions = [
            ("request_retirement", "Can request a workspace retirement"),
            ("hold_retirementrequest", "Can hold or release a retirement"),
            ("cancel_retirementrequest", "Can cancel a retirement"),
            ("resume_retirementrequest", "Can resume a retirement watcher"),
            ("retry_notices_retirementrequest", "Can re-arm failed retirement notices"),
            ("assign_retirementrequest", "Can assign a retirement case to someone"),
        ]

    def __str__(self) -> str:
        return f"retirement of {self.workspace.slug} ({self.get_status_display().lower()})"

    @transition(field=status, source=RequestStatus.WAITING, target=RequestStatus.HELD)
    def hold(self) -> None:
        pass

    @transition(field=status, source=RequestStatus.HELD, target=RequestStatus.WAITING)
    def release(self) -> None:
        pass

    @transition(field=status, source=[RequestStatus.WAITING, RequestStatus.HELD], target=RequestStatus.CANCELLED)
    def cancel(self) -> None:
        pass

    @transition(field=status, source=RequestStatus.WAITING, target=RequestStatus.EXECUTING)
    def begin_execution(self) -> None:
        pass

    @transition(field=status, source=RequestStatus.EXECUTING, target=RequestStatus.COMPLETED)
    def complete(self) -> None:
        pass

    @transition(field=status, source=RequestStatus.EXECUTING, target=RequestStatus.CLOSED)
    def close_refused(self) -> None:
        """Staff closed it after the boundary refused its purge (nothing was purged)."""

    @transition(field=status, source=[RequestStatus.WAITING, RequestStatus.HELD], target=RequestStatus.CLOSED)
    def close(self) -> None:
        pass


class NoticeStatus(models.TextChoices):
    PENDING = "pending"
    SENDING = "sending"
    DELIVERED = "delivered"
    SUPPRESSED = "suppressed"
    FAILED = "failed"


class MoveCarriesItsReason(pgtrigger.Trigger):
    """A notice slot re-planned (its due time changes) or suppressed writes why in the same update,
    a reason of its own (not the one an earlier move left); `moved_because` changes with a move only."""

    when = pgtrigger.Before
    operation = pgtrigger.Update

    def __init__(self, *, name: str) -> None:
        super().__init__(
            name=name,
            condition=pgtrigger.Condition(
                "OLD.due_at IS DISTINCT FROM NEW.due_at OR OLD.moved_because IS DISTINCT FROM NEW.moved_because"
                " OR (NEW.status = 'suppressed' AND OLD.status IS DISTINCT FROM 'suppressed')"
            ),
        )

    def get_func(self, model: Any) -> str:
        moved = "OLD.due_at IS DISTINCT FROM NEW.due_at OR (NEW.status = 'suppressed' AND OLD.status <> 'suppressed')"
        return (
            f"IF ({moved}) AND NEW.moved_because <> '' AND NEW.moved_because IS DISTINCT FROM OLD.moved_because "
            "THEN RETURN NEW; END IF; "
            f"IF {moved} THEN RAISE EXCEPTION '%: a notice re-planned or suppressed says why, in the same update "
            "(moved_because, a reason of its own)', TG_TABLE_NAME USING ERRCODE = '23514'; END IF; "
            "RAISE EXCEPTION '%: moved_because is written with a move only, never afterwards', TG_TABLE_NAME "
            "USING ERRCODE = '23514';"
        )


class NoticeSlot(FSMModelMixin, models.Model):
    request = models.ForeignKey(  # indexed by one_notice_slot_per_kind_and_time (request, kind, due_at)
        RetirementRequest, on_delete=models.PROTECT, related_name="notices", db_index=False
    )
    kind = models.CharField(max_length=32)
    due_at = models.DateTimeField()
    gating = models.BooleanField()
    status = FSMField(default=NoticeStatus.PENDING, choices=NoticeStatus.choices, protected=True, max_length=16)
    attempts = models.IntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    delivered_at = models.DateTimeField(null=True, blank=True)
    # Who is sending it now, until when: a concurrent watcher skips a live claim. Each claim takes
    # the next generation; the sender re-checks holder and generation just before its send, and its
    # outcome is saved only under both (a stale holder stands down).
    claimed_by = models.CharField(max_length=200, blank=True, default="")
    claim_expires_at = models.DateTimeField(null=True, blank=True)
    claim_generation = models.IntegerField(default=0)
    # Why the slot is not as first planned: re-planned (a new due time), added by a re-plan, or
    # suppressed. Written with the move, by the one writer that moves slots (`store.notices.replan`);
    # the database refuses a move without its own reason, and a reason changed without a move.
    moved_because = models.TextField(blank=True, default="", db_default="")

    class Meta:
        ordering = ["due_at", "id"]
        triggers = [
            FSMGuard(name="status_moves_as_declared", field="status"),
            ClaimFence(name="claims_take_the_next_generation"),
            MoveCarriesItsReason(name="a_move_carries_its_reason"),
            # Delivered or suppressed, a notice is a record of what the workspace was told: never rewritten.
            EvidenceOnceFinal(
                name="settled_notice_is_evidence",
                what="a delivered or suppressed notice",
                final="OLD.status IN ('delivered', 'suppressed')",
                allowed="false",
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["request", "kind", "due_at"], name="one_notice_slot_per_kind_and_time"),
        ]
        indexes = [  # due notices (the watcher) and failed ones (health, overview) without a scan
            models.Index(fields=["status", "due_at"], name="notice_status_due"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} at {self.due_at:%Y-%m-%d %H:%M} ({self.status})"

    # A claim whose sender died (claim expired) is claimed again: at least once, never twice for nothing.
    @transition(field=status, source=[NoticeStatus.PENDING, NoticeStatus.SENDING], target=NoticeStatus.SENDING)
    def claim(self) -> None:
        pass

    @transition(field=status, source=NoticeStatus.SENDING, target=NoticeStatus.PENDING)
    def retry_later(self) -> None:
        pass

    @transition(field=status, source=NoticeStatus.SENDING, target=NoticeStatus.DELIVERED)
    def deliver(self) -> None:
        pass

    @transition(field=status, source=[NoticeStatus.PENDING, NoticeStatus.SENDING], target=NoticeStatus.SUPPRESSED)
    def suppress(self) -> None:
        pass

    @transition(field=status, source=NoticeStatus.SENDING, target=NoticeStatus.FAILED)
    def give_up(self) -> None:
        pass

    @transition(field=status, source=NoticeStatus.FAILED, target=NoticeStatus.PENDING)
    def rearm(self) -> None:
        """A staff decision gives a failed notice a fresh attempt budget."""


class WatcherStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    SETTLED = "settled"
    SUPERSEDED = "superseded"


class RetirementWatcher(FSMModelMixin, models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    request = models.ForeignKey(RetirementRequest, on_delete=models.PROTECT, related_name="watchers")
    status = FSMField(default=WatcherStatus.PENDING, choices=WatcherStatus.choices, protected=True, max_length=16)
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    concluded_at = models.DateTimeField(null=True, blank=True)
    conclusion = models.TextField(blank=True, default="")
    replaces = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="+")

    class Meta:
        ordering = ["created_at"]
        triggers = [
            FSMGuard(name="status_moves_as_declared", field="status"),
            DeletedOnlyByRetention(name="deleted_only_by_retention"),
        ]
        indexes = [  # the stall check's "never started" branch
            models.Index(fields=["created_at"], condition=Q(started_at__isnull=True), name="watcher_never_started")
        ]

    def __str__(self) -> str:
        return f"watcher {self.id} ({self.status})"

    @transition(field=status, source=WatcherStatus.PENDING, target=WatcherStatus.RUNNING)
    def start(self) -> None:
        pass

    @transition(field=status, source=[WatcherStatus.PENDING, WatcherStatus.RUNNING], target=WatcherStatus.SETTLED)
    def settle(self) -> None:
        pass

    @transition(field=status, source=[WatcherStatus.PENDING, WatcherStatus.RUNNING], target=WatcherStatus.SUPERSEDED)
    def supersede(self) -> None:
        pass


class PurgeStatus(models.TextChoices):
    QUEUED = "queued"
    DONE = "done"
    REFUSED = "refused"


class PurgeJob(FSMModelMixin, models.Model):
    request = models.OneToOneField(RetirementRequest, on_delete=models.PROTECT, related_name="purge_job")
    operation_id = models.UUIDField(default=uuid.uuid4, unique=True)
    status = FSMField(default=PurgeStatus.QUEUED, choices=PurgeStatus.choices, protected=True, max_length=16)
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    # The executor's lease: every write checks owner + generation, as deletions do.
    lease_owner = models.CharField(max_length=200, null=True, blank=True)
    lease_generation = models.BigIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    refusal = models.TextField(blank=True, default="")

    class Meta:
        triggers = [
            FSMGuard(name="status_moves_as_declared", field="status"),
            DeletedOnlyByRetention(name="deleted_only_by_retention"),
        ]

    def __str__(self) -> str:
        return f"purge {self.operation_id} ({self.status})"

    @transition(field=status, source=PurgeStatus.QUEUED, target=PurgeStatus.DONE)
    def finish(self) -> None:
        pass

    @transition(field=status, source=PurgeStatus.QUEUED, target=PurgeStatus.REFUSED)
    def refuse(self) -> None:
        """The receiving boundary refused: nothing was purged."""

    @transition(field=status, source=PurgeStatus.REFUSED, target=PurgeStatus.QUEUED)
    def retry(self) -> None:
        """Staff retried it once the requester's authority was back; the boundary rechecks."""


class Decision(DecisionRecord):
    """Every staff decision and boundary outcome (the shape both workflows share)."""

    request = models.ForeignKey(RetirementRequest, null=True, on_delete=models.PROTECT, related_name="decisions")
    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="decisions")

    class Meta(DecisionRecord.Meta):
        pass


class Alarm(models.Model):
    """An alarm an operator must see: failed notices, stalled watchers, a refused purge, a late
    purge executor. Resolved by the move that answers it; one no move answers
    (`contract.CLOSED_BY_A_PERSON`) only by a person's decision with a reason, which it then names."""

    kind = models.CharField(max_length=32)
    request = models.ForeignKey(RetirementRequest, on_delete=models.PROTECT, related_name="alarms")
    slot = models.ForeignKey("NoticeSlot", null=True, blank=True, on_delete=models.PROTECT, related_name="alarms")
    message = models.TextField()
    created_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    decision = models.ForeignKey(  # read from the alarm only (a decision closes one alarm)
        Decision,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
        help_text="the person's decision that closed it (who, when and why)",
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "request", "slot"],
                condition=Q(resolved_at__isnull=True),
                nulls_distinct=False,
                name="one_open_alarm_per_kind_and_slot",
            ),
        ]
        # A record of what happened: resolved once (with who and why, when a person closes it), never rewritten.
        triggers = [
            SettledOnce(name="resolved_once", what="an alarm", column="resolved_at", prefixes=("resolved", "decision")),
            # An alarm no move answers closes only with a person's close_alarm decision on its case, with a reason.
            closed_by_a_named_decision(
                name="closed_by_a_named_decision", decisions="retirements_decision", kinds=CLOSED_BY_A_PERSON
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"
