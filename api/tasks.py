"""django-q2 entry points for the API (thin)."""

from __future__ import annotations


def send_webhooks() -> dict[str, int]:
    """Scheduled every minute: due webhook deliveries are sent (`api.webhooks.send_due`)."""
    from api.webhooks import send_due

    return send_due()
