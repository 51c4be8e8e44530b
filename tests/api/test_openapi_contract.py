"""The OpenAPI document declares what the server enforces: schemathesis generates requests from
it (ones that keep to it and ones that break it), sends them to the API in this process, and runs
every check it enables by default on each answer: no server error, the status codes, content
types, headers and bodies the document declares, data that keeps to the document accepted (2xx,
or refused for the case's state: 404, 409) and data that breaks it refused (400)."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import Group, Permission, User
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.generation import GenerationMode

from core import tokens
from ops.groups import ensure_groups

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

EXAMPLES = 25  # per operation and mode: 14 operations x 2 modes


def _schema() -> Any:
    from config.wsgi import application

    return schemathesis.openapi.from_wsgi("/api/v1/openapi.json", application)


def test_every_operation_keeps_to_the_document_under_generated_requests(settings_: Any, observe) -> None:
    ensure_groups(Group, Permission)
    user = User.objects.create_user("contract", password="pw-for-tests", is_staff=True)
    for name in ("operators", "approvers", "intake"):
        user.groups.add(Group.objects.get(name=name))
    headers = {"Authorization": f"Bearer {tokens.issue(user, name='contract', scope='decide')}"}
    schema = _schema()
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 14, [op.label for op in operations]
    calls: dict[str, int] = {}
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
            )
            def exercise(case: Any) -> None:
                case.call_and_validate(headers=headers)
                calls[case.operation.label] = calls.get(case.operation.label, 0) + 1

            exercise()
    observe(f"schemathesis: {len(operations)} operations, {sum(calls.values())} generated calls, every check passed")


@pytest.fixture
def settings_(settings: Any) -> Any:
    """The API as served, in this test's transaction: requests keep the test's connection open
    (as Django's test client does), and the rate limit, not under test here, is lifted."""
    settings.API_RATE_PER_MINUTE = 1_000_000
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield settings
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
