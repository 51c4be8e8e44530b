"""The decision log: one shape for every staff decision and system outcome, in both workflows.

Each workflow keeps its own table (a subclass of `DecisionRecord` with a `request`
foreign key); `record()` writes a row and a log line that carries ids only.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, TypeVar

from django.conf import settings
from django.db import models

from core.authority import Actor
from core.lifecycle import AppendOnly


class DecisionRecord(models.Model):
    """Who decided what, why and when."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor_label = models.CharField(max_length=150, help_text="username, or the system component")
    action = models.CharField(max_length=64)
    reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField()
    generation = models.BigIntegerField(null=True, blank=True, help_text="the lease generation it acted under")

    class Meta:
        abstract = True
        ordering = ["created_at", "id"]
        # Evidence: a log row is never rewritten or removed, whatever writes to the database (but by
        # the retention job, reducing a closed case past its period to a tombstone).
        triggers = [AppendOnly(name="append_only")]

    def __str__(self) -> str:
        return f"{self.actor_label}: {self.action}"


D = TypeVar("D", bound=DecisionRecord)


def record(
    model: type[D],
    *,
    actor: Actor | None,
    action: str,
    reason: str,
    now: datetime,
    system: str = "system",
    generation: int | None = None,
    **links: Any,
) -> D:
    """Save one decision; `actor` None means the system component named by `system` decided."""
    label = actor.name if actor is not None else system
    user = actor.user if actor is not None else None
    row = model._default_manager.create(
        actor=user, actor_label=label, action=action, reason=reason, created_at=now, generation=generation, **links
    )
    # Ids only in logs: the row keeps who and why.
    logging.getLogger(model._meta.app_label).info(
        "decision request=%s action=%s actor_id=%s",
        getattr(row, "request_id", None),
        action,
        user.pk if user is not None else None,
    )
    return row
