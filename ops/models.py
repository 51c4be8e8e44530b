"""Operations' own tables: the cluster heartbeat, and the notifications that tell people when
they must act (both workflows), with each person's preference."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django_fsm import FSMField, FSMModelMixin, transition

from core.lifecycle import AppendOnly, ClaimFence, EvidenceOnceFinal, FSMGuard, SettledOnce


class ClusterHeartbeat(models.Model):
    """Written every minute by each django-q2 cluster's schedule: proof that a cluster is alive."""

    name = models.CharField(max_length=200, primary_key=True)
    seen_at = models.DateTimeField()

    class Meta:
        db_table = "ops_cluster_heartbeats"

    def __str__(self) -> str:
        return f"{self.name} at {self.seen_at}"


class Delivery(models.TextChoices):
    IMMEDIATE = "immediate", "each message as it happens"
    DIGEST = "digest", "one digest a day"
    OFF = "off", "off (deadlines still come)"


class NotificationPreference(models.Model):
    """How a person wants to be told (immediate by default)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, primary_key=True, on_delete=models.CASCADE)
    delivery = models.CharField(max_length=16, choices=Delivery.choices, default=Delivery.IMMEDIATE)

    class Meta:
        db_table = "ops_notification_preferences"

    def __str__(self) -> str:
        return f"{self.user}: {self.delivery}"


class NotificationStatus(models.TextChoices):
    PENDING = "pending", "waiting to be sent"
    SENDING = "sending", "being sent"
    SENT = "sent", "sent"
    DIGEST = "digest", "kept for the daily digest"
    DIGESTED = "digested", "sent in a digest"
    FAILED = "failed", "failed every attempt"


class Notification(FSMModelMixin, models.Model):
    """One message to one person about one occurrence (`key`): at most one row per person and
    occurrence, claimed before it is sent, so it is sent at least once and never twice for nothing."""

    recipient = models.ForeignKey(  # indexed by one_notification_per_occurrence (recipient, key)
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    key = models.CharField(max_length=200, help_text="the occurrence: event, case and what makes it new")
    event = models.CharField(max_length=32)
    case_kind = models.CharField(max_length=16)
    case_id = models.UUIDField()
    subject = models.CharField(max_length=200)
    body = models.TextField()
    status = FSMField(
        default=NotificationStatus.PENDING, choices=NotificationStatus.choices, protected=True, max_length=16
    )
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    attempts = models.IntegerField(default=0)
    claimed_by = models.CharField(max_length=200, blank=True, default="")
    claim_expires_at = models.DateTimeField(null=True, blank=True)
    # The claim's generation: the next one at each claim; the send and its saved outcome are fenced
    # on holder and generation, so a sender whose claim was taken over stands down.
    claim_generation = models.IntegerField(default=0)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        db_table = "ops_notifications"
        constraints = [models.UniqueConstraint(fields=["recipient", "key"], name="one_notification_per_occurrence")]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="notification_due"),
            models.Index(fields=["case_kind", "case_id"], name="notification_case"),
        ]
        triggers = [
            FSMGuard(name="status_moves_as_declared", field="status"),
            ClaimFence(name="claims_take_the_next_generation"),
            # Sent (alone or in a digest) or given up, it is the record of what a person was told.
            EvidenceOnceFinal(
                name="sent_notification_is_evidence",
                what="a sent notification",
                final="OLD.status IN ('sent', 'digested', 'failed')",
                allowed="false",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} to {self.recipient_id} ({self.status})"

    @transition(
        field=status, source=[NotificationStatus.PENDING, NotificationStatus.SENDING], target=NotificationStatus.SENDING
    )
    def claim(self) -> None:
        """A sender takes it (again, once a dead sender's claim ran out)."""

    @transition(field=status, source=NotificationStatus.SENDING, target=NotificationStatus.SENT)
    def sent(self) -> None:
        pass

    @transition(field=status, source=NotificationStatus.SENDING, target=NotificationStatus.PENDING)
    def retry(self) -> None:
        pass

    @transition(field=status, source=NotificationStatus.SENDING, target=NotificationStatus.FAILED)
    def give_up(self) -> None:
        pass

    @transition(field=status, source=NotificationStatus.DIGEST, target=NotificationStatus.DIGESTED)
    def digested(self) -> None:
        pass


class RecordsHold(models.Model):
    """A staff decision that a case's records stay, whatever their retention period says (an
    investigation, a complaint, a legal request): placed with a reason, released with one."""

    case_kind = models.CharField(max_length=16)
    case_id = models.UUIDField()
    reason = models.TextField()
    placed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    placed_at = models.DateTimeField()
    released_at = models.DateTimeField(null=True, blank=True)
    released_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    release_reason = models.TextField(blank=True, default="")

    class Meta:
        db_table = "ops_records_holds"
        constraints = [
            models.UniqueConstraint(
                fields=["case_kind", "case_id"], condition=Q(released_at__isnull=True), name="one_open_records_hold"
            ),
            # Released by a decision: a person and a reason, with the time.
            models.CheckConstraint(
                condition=Q(released_at__isnull=True) | (Q(released_by__isnull=False) & ~Q(release_reason="")),
                name="records_hold_released_by_a_person_with_a_reason",
            ),
        ]
        # Placed by a decision, released once by another (who, when, why), never rewritten or deleted.
        triggers = [
            SettledOnce(
                name="released_once", what="a records hold", column="released_at", prefixes=("release",), retained=False
            )
        ]
        permissions = [("place_recordshold", "Can place or release a records hold")]

    def __str__(self) -> str:
        return f"records hold on {self.case_kind} {self.case_id}"


class Tombstone(models.Model):
    """What stays of a closed case past its retention period: ids, dates, outcome, who approved
    (user ids), the operations, and the digest of its proof; no personal identifiers."""

    case_kind = models.CharField(max_length=16)
    case_id = models.UUIDField()
    opened_at = models.DateTimeField()
    closed_at = models.DateTimeField()
    outcome = models.CharField(max_length=32)
    approver_ids = models.JSONField(default=list)
    operation_ids = models.JSONField(default=list)
    proof_digest = models.CharField(max_length=80)
    made_at = models.DateTimeField()
    run = models.ForeignKey("RetentionRun", on_delete=models.PROTECT, related_name="tombstones")

    class Meta:
        db_table = "ops_tombstones"
        constraints = [models.UniqueConstraint(fields=["case_kind", "case_id"], name="one_tombstone_per_case")]
        triggers = [AppendOnly(name="tombstones_append_only")]  # what stays of a case stays as it was written

    def __str__(self) -> str:
        return f"{self.case_kind} {self.case_id}: {self.outcome}"


class RetentionRun(models.Model):
    """One run of the retention job: when, what it was allowed to do, and what it did."""

    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    dry_run = models.BooleanField(default=False)
    periods = models.JSONField(default=dict)
    counts = models.JSONField(default=dict)
    stopped_early = models.BooleanField(default=False, help_text="its time budget ran out; the rest is next run's")

    class Meta:
        db_table = "ops_retention_runs"
        # The job's log: written as it starts, finished once, then never rewritten.
        triggers = [
            EvidenceOnceFinal(
                name="finished_run_is_evidence",
                what="a finished retention run",
                final="OLD.finished_at IS NOT NULL",
                allowed="false",
            )
        ]

    def __str__(self) -> str:
        return f"retention run {self.pk} at {self.started_at:%Y-%m-%d %H:%M:%S}"


class Tally(models.Model):
    """A running count `/metrics` reads instead of counting the tables: how many cases are in
    each state, stage attempts by stage and outcome, their durations, refusals at a boundary.

    The database keeps it (triggers of migration ops/0014): each change writes a `TallyEvent` in
    its own transaction, whatever wrote the change, and a scrape folds the events into these rows
    (`ops.metrics`). So a scrape costs the same at a hundred cases or a million, and a count is
    never ahead of or behind what committed."""

    metric = models.CharField(max_length=40)
    label = models.CharField(max_length=120)
    n = models.BigIntegerField(default=0)
    total = models.FloatField(default=0, help_text="a sum kept beside the count (seconds, for a histogram)")

    class Meta:
        db_table = "ops_tallies"
        constraints = [models.UniqueConstraint(fields=["metric", "label"], name="one_tally_per_label")]

    def __str__(self) -> str:
        return f"{self.metric}[{self.label}] = {self.n}"


class TallyEvent(models.Model):
    """One change to a tally, appended by a trigger (never updated, so two writers never wait on
    each other), and folded into `Tally` by the next scrape."""

    id = models.BigAutoField(primary_key=True)
    metric = models.CharField(max_length=40)
    label = models.CharField(max_length=120)
    n = models.BigIntegerField()
    total = models.FloatField(default=0)

    class Meta:
        db_table = "ops_tally_events"

    def __str__(self) -> str:
        return f"{self.metric}[{self.label}] {self.n:+d}"
