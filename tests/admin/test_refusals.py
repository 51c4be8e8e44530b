"""Refusals in the admin's own look: a malformed or unknown id is a 404 that says so, a missing permission a 403
that names it; never a 500."""

from __future__ import annotations

import html
import uuid

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/admin/deletions/deletionrequest/zzz/change/", "request id 'zzz' is not a UUID"),
        ("/admin/retirements/retirementrequest/zzz/change/", "request id 'zzz' is not a UUID"),
        (f"/admin/deletions/deletionrequest/{uuid.UUID(int=7)}/change/", "no deletion request with id"),
        (f"/admin/retirements/retirementrequest/{uuid.UUID(int=7)}/change/", "no retirement request with id"),
        # The action URL's converter refuses it; the admin redirects to the case page, which says why.
        ("/admin/deletions/deletionrequest/zzz/approve/", "request id 'zzz/approve' is not a UUID"),
    ],
)
def test_a_malformed_or_unknown_case_id_is_a_404_in_the_admin_look(login, path: str, says: str) -> None:
    response = login("support").get(path, follow=True)
    assert response.status_code == 404
    page = html.unescape(response.content.decode())
    assert 'id="refusal"' in page and 'id="header"' in page  # inside the admin chrome
    assert says in page


def test_a_missing_permission_is_a_403_that_names_it(login, staff) -> None:
    from deletions.models import DeletionRequest
    from tests.conftest import submit_and_approve

    req = submit_and_approve("demo:refusal")
    assert DeletionRequest.objects.filter(id=req.id).exists()
    response = login("support").post(f"/admin/deletions/deletionrequest/{req.id}/cancel/", {"reason": "no"})
    assert response.status_code == 403
    page = html.unescape(response.content.decode())
    assert 'id="header"' in page and "only staff allowed to cancel deletion requests can do this" in page
    assert DeletionRequest.objects.get(id=req.id).cancel_requested_at is None


WORKSPACE_LIST = "/admin/retirements/workspace/"
DELETION_LIST = "/admin/deletions/deletionrequest/"
RETIREMENT_LIST = "/admin/retirements/retirementrequest/"


@pytest.mark.parametrize(
    ("path", "query"),
    [
        (DELETION_LIST, "status__exact=%00"),
        (DELETION_LIST, "target__regex=%5B"),
        (DELETION_LIST, "created_at__gte=zzz"),
        (DELETION_LIST, "id__exact=zzz"),
        (DELETION_LIST, "created_at__year=99999999999999999999"),
        (RETIREMENT_LIST, "status__exact=%00"),
        (RETIREMENT_LIST, "requested_at__month=zz"),
        (WORKSPACE_LIST, "name__regex=%5B"),
        (WORKSPACE_LIST, "id__exact=1e999"),
        ("/admin/django_q/success/", "started__gte=zzz"),
        ("/admin/auth/user/", "id__exact=%00"),
        (DELETION_LIST + "export.csv", "status__exact=%00"),
    ],
)
def test_a_bad_filter_value_never_gives_a_500(client, path: str, query: str) -> None:
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_superuser("root-1", "root@hq.example", "pw"))  # sees every list
    response = client.get(f"{path}?{query}", follow=True)
    assert response.status_code in (200, 400, 404), response.status_code
    if response.status_code != 200:
        page = html.unescape(response.content.decode())
        assert 'id="refusal"' in page and "not valid" in page


@pytest.mark.parametrize(
    "path",
    [
        "/admin/retirements/workspace/zzz/change/",
        "/admin/retirements/workspace/zzz/request-retirement/",
        "/admin/retirements/retirementrequest/zzz/hold/",
        "/admin/django_q/schedule/zzz/change/",
        "/admin/django_q/success/zzz/change/",
        "/admin/auth/user/zzz/change/",
        "/admin/deletions/deletionrequest/zzz/history/",
        "/admin/deletions/deletionrequest/%00/change/",
    ],
)
def test_a_malformed_id_anywhere_in_the_admin_is_never_a_500(client, path: str) -> None:
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_superuser("root-1", "root@hq.example", "pw"))
    response = client.get(path, follow=True)
    assert response.status_code in (200, 404), response.status_code
