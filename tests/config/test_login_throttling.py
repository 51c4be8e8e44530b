"""Login throttling (django-axes): five wrong passwords lock the username out from that address."""

from __future__ import annotations

import logging

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db


def test_after_five_failures_even_the_right_password_is_refused(caplog) -> None:
    User.objects.create_user("operator-9", password="right-password-9", is_staff=True)
    client = Client(REMOTE_ADDR="203.0.113.7")
    axes_log = logging.getLogger("axes")  # routed to the console, not propagated: listen to it directly
    axes_log.addHandler(caplog.handler)
    try:
        codes = [
            client.post("/admin/login/", {"username": "operator-9", "password": f"wrong-{i}"}).status_code
            for i in range(30)
        ]
        right = client.post("/admin/login/", {"username": "operator-9", "password": "right-password-9"})
    finally:
        axes_log.removeHandler(caplog.handler)
    assert codes[:4] == [200] * 4  # the login form again, with its error
    assert set(codes[5:]) == {429}  # locked out
    assert right.status_code == 429 and "Too many failed logins" in right.content.decode()
    assert "_auth_user_id" not in client.session
    attempt = AccessAttempt.objects.get(username="operator-9")
    assert attempt.failures_since_start >= 5 and attempt.ip_address == "203.0.113.7"
    lockouts = [r.getMessage() for r in caplog.records if "locking out" in r.getMessage().lower()]
    assert lockouts  # the lockout is logged ...
    assert all("operator-9" not in m and "203.0.113.7" not in m for r in caplog.records for m in [r.getMessage()])

    # Another address is not locked out; a superuser sees the lockout in the admin.
    other = Client(REMOTE_ADDR="198.51.100.9")
    assert other.post("/admin/login/", {"username": "operator-9", "password": "right-password-9"}).status_code == 302
    root = User.objects.create_superuser("root-1", "root@hq.example", "pw")
    admin = Client()
    admin.force_login(root)
    listing = admin.get("/admin/axes/accessattempt/")
    assert listing.status_code == 200 and "operator-9" in listing.content.decode()
