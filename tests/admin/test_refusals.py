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
    assert 'id="header"' in page and "this action needs the permission deletions.cancel_deletionrequest" in page
    assert DeletionRequest.objects.get(id=req.id).cancel_requested_at is None
