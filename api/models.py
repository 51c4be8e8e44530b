"""The API's own tables: idempotency keys, per-token rate windows, and the webhook subscribers
with their deliveries (one row per subscriber and case state change, written by a trigger on the
case tables, so no writer of a case can forget to announce it)."""

import uuid

from django.conf import settings
from django.db import models
from django_fsm import FSMField, FSMModelMixin, transition

from core.lifecycle import EvidenceOnceFinal, FSMGuard


class IdempotencyKey(models.Model):
    """A POST's `Idempotency-Key`, per person: the first answer is kept and given again to a repeat
    with the same body; a different body under the same key is refused."""

    user = models.ForeignKey(  # indexed by api_idempotency_once_per_user (user, key)
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of the method, path and body")
    status_code = models.PositiveSmallIntegerField(null=True)
    response = models.JSONField(null=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "api_idempotency_keys"
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="api_idempotency_once_per_user")]

    def __str__(self) -> str:
        return f"{self.key} ({self.user_id})"


class RateWindow(models.Model):
    """How many calls a token made in one minute."""

    token = models.ForeignKey(  # indexed by api_rate_window_once (token, minute)
        "core.ApiToken", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    minute = models.DateTimeField()
    calls = models.PositiveIntegerField()

    class Meta:
        db_table = "api_rate_windows"
        constraints = [models.UniqueConstraint(fields=["token", "minute"], name="api_rate_window_once")]

    def __str__(self) -> str:
        return f"{self.token_id} at {self.minute}: {self.calls}"


class WebhookSubscriber(models.Model):
    """An intake system told of every state change of a case: POSTed, signed with its secret."""

    name = models.CharField(max_length=100, unique=True)
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=100, help_text="shared with the subscriber; signs every delivery (HMAC)")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "api_webhook_subscribers"

    def __str__(self) -> str:
        return self.name


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "waiting to be sent"
    SENDING = "sending", "being sent"
    DELIVERED = "delivered", "delivered"
    FAILED = "failed", "failed every attempt"


class WebhookDelivery(FSMModelMixin, models.Model):
    """One state change for one subscriber: sent at least once (claimed, then saved), retried with
    backoff; its id travels with it so the subscriber can drop a repeat."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    subscriber = models.ForeignKey(WebhookSubscriber, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=64)
    case_kind = models.CharField(max_length=16)
    case_id = models.UUIDField()
    payload = models.JSONField()
    status = FSMField(default=DeliveryStatus.PENDING, choices=DeliveryStatus.choices, protected=True, max_length=16)
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField()
    claimed_by = models.CharField(max_length=100, blank=True, default="")
    claim_expires_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True, help_text="the subscriber's HTTP status")
    last_error = models.TextField(blank=True, default="")
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "api_webhook_deliveries"
        verbose_name_plural = "webhook deliveries"
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="api_deliveries_due",
                condition=models.Q(status__in=["pending", "sending"]),
            ),
            models.Index(fields=["case_id"], name="api_deliveries_by_case"),
        ]
        triggers = [
            FSMGuard(name="status_moves_as_declared", field="status"),
            # Delivered or given up, it is the record of what a subscriber was told (a waiting one
            # may still be dropped: the outbox's own working row).
            EvidenceOnceFinal(
                name="final_delivery_is_evidence",
                what="a delivered or failed webhook delivery",
                final="OLD.status IN ('delivered', 'failed')",
                allowed="false",
                kept="OLD.status IN ('delivered', 'failed')",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.case_id} to {self.subscriber_id}"

    @transition(field=status, source=[DeliveryStatus.PENDING, DeliveryStatus.SENDING], target=DeliveryStatus.SENDING)
    def claim(self) -> None:
        """A sender takes it (again, once a dead sender's claim ran out)."""

    @transition(field=status, source=DeliveryStatus.SENDING, target=DeliveryStatus.DELIVERED)
    def delivered(self) -> None:
        pass

    @transition(field=status, source=DeliveryStatus.SENDING, target=DeliveryStatus.PENDING)
    def retry(self) -> None:
        pass

    @transition(field=status, source=DeliveryStatus.SENDING, target=DeliveryStatus.FAILED)
    def give_up(self) -> None:
        pass
