"""Each staff user makes, names, scopes and revokes their own tokens in the admin; the token is
shown once, only its digest stays; nobody sees another person's tokens but a superuser."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from core import tokens
from core.models import ApiToken

LIST = "/admin/core/apitoken/"


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_staff_user_makes_a_token_sees_it_once_and_revokes_it(staff) -> None:
    client = logged_in(staff["support"])
    response = client.post(f"{LIST}add/", {"name": "my laptop", "scope": "read", "days": "30"}, follow=True)
    assert response.status_code == 200
    shown = [str(m) for m in response.context["messages"] if "shown this once" in str(m)]
    assert len(shown) == 1
    raw = shown[0].rsplit(" ", 1)[1]
    token = ApiToken.objects.get(user=staff["support"])
    assert token.digest == tokens.digest(raw) and token.name == "my laptop" and token.scope == "read"
    assert (token.expires_at - token.created_at).days == 30
    assert raw not in client.get(LIST).content.decode()  # never shown again
    assert tokens.use(raw).actor.name == "support-1"
    client.post(LIST, {"action": "revoke", "_selected_action": [token.pk]})
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    assert Client().get("/api/v1/deletions", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401


def test_nobody_sees_or_revokes_another_persons_tokens(staff) -> None:
    theirs = tokens.issue(staff["operator"], name="operator's", scope="decide")
    mine = logged_in(staff["support"])
    assert b"operator&#x27;s" not in mine.get(LIST).content and b"operator's" not in mine.get(LIST).content
    other = ApiToken.objects.get(digest=tokens.digest(theirs))
    mine.post(LIST, {"action": "revoke", "_selected_action": [other.pk]})
    assert ApiToken.objects.get(pk=other.pk).revoked_at is None
    assert mine.get(f"{LIST}{other.pk}/change/").status_code in (302, 404)
    root = logged_in(User.objects.create_superuser("root-tok", "r@x", "pw"))
    assert b"operator&#x27;s" in root.get(LIST).content


def test_a_token_is_never_edited_or_deleted(staff) -> None:
    raw = tokens.issue(staff["support"], name="kept", scope="read")
    token = ApiToken.objects.get(digest=tokens.digest(raw))
    client = logged_in(staff["support"])
    client.post(f"{LIST}{token.pk}/change/", {"name": "renamed", "scope": "decide"})
    client.post(f"{LIST}{token.pk}/delete/", {"post": "yes"})
    token.refresh_from_db()
    assert token.name == "kept" and token.scope == "read"
    assert client.post(f"{LIST}add/", {"name": "bad\x00name", "scope": "read", "days": "30"}).status_code == 200
    assert ApiToken.objects.filter(user=staff["support"]).count() == 1
