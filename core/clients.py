"""The address of the client behind the proxies we trust (`FORWARDED_ALLOW_IPS`, the list gunicorn
is given): what login lockouts key on, so a lockout is of one client, never of the proxy."""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings


def _address(text: str) -> str | None:
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        return None


def _trusted(address: str) -> bool:
    return "*" in settings.TRUSTED_PROXIES or address in settings.TRUSTED_PROXIES


def client_address(request: Any) -> str | None:
    """REMOTE_ADDR, unless a trusted proxy sent the request: then the right-most address in
    X-Forwarded-For that is not one of our proxies (what a client writes further left is not believed)."""
    remote = _address(request.META.get("REMOTE_ADDR", "")) or None
    if remote is None or not _trusted(remote):
        return remote
    for hop in reversed(request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")):
        address = _address(hop)
        if address is None:
            return remote  # a garbled header proves nothing: the proxy is all we know
        if not _trusted(address):
            return address
    return remote
