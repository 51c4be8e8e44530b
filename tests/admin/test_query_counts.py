"""Lists and case pages cost a constant number of queries, measured with 200 rows."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from core import clock
from deletions.models import DeletionDecision, DeletionRequest, StageHistory
from retirements.models import (
    Alarm,
    Decision,
    NoticeSlot,
    RetirementRequest,
    RetirementWatcher,
    Workspace,
)

pytestmark = pytest.mark.django_db
N = 200


def count(client, path: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(path)
    assert response.status_code == 200, path
    return len(ctx.captured_queries)


def deletions(n: int, status: str = "submitted", communities: int = 0) -> list[DeletionRequest]:
    now = clock.now()
    inventory = {"communities": [{"id": str(uuid.UUID(int=i)), "role": "member"} for i in range(communities)]}
    return DeletionRequest.objects.bulk_create(
        DeletionRequest(
            target=f"demo:bulk-{uuid.uuid4().hex[:8]}",
            requested_by="operator-1",
            inventory_json=inventory,
            inventory_version=1,
            inventory_digest="0" * 64,
            status=status,
            created_at=now,
            updated_at=now,
            received_at=now,
            due_at=now + timedelta(days=30),
            next_check_at=now,  # a case waiting on people has one (a check constraint)
            owner="operator-1",
        )
        for _ in range(n)
    )


def retirements(n: int, requester: User, status: str = "waiting") -> list[RetirementRequest]:
    now = clock.now()
    tag = uuid.uuid4().hex[:6]
    spaces = Workspace.objects.bulk_create(
        Workspace(slug=f"ws-{tag}-{i}", name=f"W{i}", lifecycle="deletion_pending", created_at=now) for i in range(n)
    )
    requests = RetirementRequest.objects.bulk_create(
        RetirementRequest(
            workspace=w,
            requested_by=requester,
            owner=requester,
            reason="r",
            confirmation=w.slug,
            status=status,
            requested_at=now,
            eligible_at=now,
            eligibility_policy="standard_30_days",
            updated_at=now,
            next_wake_at=now,
            hold_reason="legal" if status == "held" else "",
            # held: a backup beside its owner and its review date (the custody constraints)
            held_at=now if status == "held" else None,
            backup=User.objects.get(username="operator-a") if status == "held" else None,
        )
        for w in spaces
    )
    watchers = RetirementWatcher.objects.bulk_create(RetirementWatcher(request=r, created_at=now) for r in requests)
    for r, w in zip(requests, watchers, strict=True):
        r.watcher = w
    RetirementRequest.objects.bulk_update(requests, ["watcher"])
    return requests


def grows(client, path: str, grow: Callable[[], object]) -> tuple[int, int]:
    small = count(client, path)
    grow()
    return small, count(client, path)


def test_deletion_list(login, staff) -> None:
    deletions(2)
    small, large = grows(login("support"), reverse("admin:deletions_deletionrequest_changelist"), lambda: deletions(N))
    assert large <= small


def test_the_deletion_list_counts_each_inventorys_communities_in_the_database(login, staff) -> None:
    """An inventory lists up to 1,000 communities: a list page shows how many stages each request
    runs without reading a single inventory (the case page reads its own)."""
    deletions(1)
    (big,) = deletions(1, communities=1000)
    client = login("support")
    with CaptureQueriesContext(connection) as ctx:
        page = client.get(reverse("admin:deletions_deletionrequest_changelist")).content.decode()
    assert "0 of about 2001" in page and "0 of about 1" in page  # the gate, then two stages per community
    assert not [q["sql"] for q in ctx.captured_queries if "inventory_json" in q["sql"] and "size()" not in q["sql"]]
    case_page = client.get(reverse("admin:deletions_deletionrequest_change", args=[big.pk])).content.decode()
    assert str(uuid.UUID(int=999)) in case_page


def test_deletion_case_page_with_200_stages_and_decisions(login, staff) -> None:
    """Each stage's result is checked against its receipt on the page: CPU per stage, no query."""
    from receiver import signing  # the demo receiver's key, registered for demo: targets

    (req,) = deletions(1, status="running")
    now = clock.now()
    previous = None
    rows = []
    signed = {"has_agents": False, "receipt": signing.evidence({"has_agents": False})}
    for i in range(N):
        row = StageHistory(
            request=req,
            stage="purge_db",
            status="completed",
            is_current=(i == N - 1),
            created_at=now,
            metadata_json={"previous_stage_id": str(previous) if previous else None, "result": signed},
        )
        previous = row.id
        rows.append(row)
    path = reverse("admin:deletions_deletionrequest_change", args=[req.pk])
    small, large = grows(
        login("support"),
        path,
        lambda: (
            StageHistory.objects.bulk_create(rows),
            DeletionDecision.objects.bulk_create(
                DeletionDecision(request=req, actor_label="x", action="note", created_at=now) for _ in range(N)
            ),
        ),
    )
    assert large <= small


def test_retirement_list(login, staff) -> None:
    retirements(2, staff["operator"])
    path = reverse("admin:retirements_retirementrequest_changelist")
    small, large = grows(login("support"), path, lambda: retirements(N, staff["operator"]))
    assert large <= small


def test_workspace_list(login, staff) -> None:
    retirements(2, staff["operator"])
    small, large = grows(
        login("support"), reverse("admin:retirements_workspace_changelist"), lambda: retirements(N, staff["operator"])
    )
    assert large <= small


def test_retirement_case_page_with_200_notices_watchers_and_decisions(login, staff) -> None:
    (req,) = retirements(1, staff["operator"])
    now = clock.now()
    from datetime import timedelta

    def grow() -> None:
        NoticeSlot.objects.bulk_create(
            NoticeSlot(request=req, kind="final_warning", due_at=now + timedelta(minutes=i), gating=True)
            for i in range(N)
        )
        RetirementWatcher.objects.bulk_create(RetirementWatcher(request=req, created_at=now) for _ in range(N))
        Decision.objects.bulk_create(
            Decision(request=req, workspace=req.workspace, actor_label="x", action="note", created_at=now)
            for _ in range(N)
        )

    path = reverse("admin:retirements_retirementrequest_change", args=[req.pk])
    small, large = grows(login("support"), path, grow)
    assert large <= small


def test_operations_overview(login, staff) -> None:
    def grow() -> None:
        deletions(N, status="needs_attention")
        deletions(N, status="submitted")
        held = retirements(N, staff["operator"], status="held")
        waiting = retirements(N, staff["operator"])  # never-started watchers: stalled after 15 min
        now = clock.now()
        NoticeSlot.objects.bulk_create(
            NoticeSlot(request=r, kind="final_warning", due_at=now, gating=True, status="failed") for r in held
        )
        Alarm.objects.bulk_create(
            Alarm(kind="watcher_stalled", request=r, message="m", created_at=now) for r in waiting
        )

    small, large = grows(login("support"), reverse("operations"), grow)
    assert large <= small


def test_workspace_change_page(login, staff) -> None:
    (req,) = retirements(1, staff["operator"])
    path = reverse("admin:retirements_workspace_change", args=[req.workspace_id])
    small, large = grows(login("support"), path, lambda: retirements(N, staff["operator"]))
    assert large <= small


def test_the_overview_shows_up_to_its_limit_of_each_kind_and_links_them_all(login, staff) -> None:
    from ops.overview import LIMIT

    deletions(LIMIT + 5, status="needs_attention")
    deletions(2, status="submitted")
    page = login("support").get(reverse("operations")).content.decode()
    waiting = page.split('id="waiting-on-human"')[1].split("</table>")[0]
    assert waiting.count(">needing attention</td>") == LIMIT  # not the 5 past the limit (the story's words)
    assert waiting.count(">waiting for an approver (not the submitter) to approve the inventory</td>") == 2
    lists = page.split('id="waiting-lists"')[1].split("</p>")[0]
    assert f"Up to {LIMIT} of each kind" in lists and "?status__exact=needs_attention" in lists, lists


def test_the_overview_says_the_systems_health_apart_from_the_work_waiting(login, staff) -> None:
    """As `manage.py health` does: cases needing a person are work (counted, the oldest given),
    never the system's fault; a missing cluster heartbeat is."""
    from ops.health import beat

    deletions(3, status="needs_attention")
    page = login("support").get(reverse("operations")).content.decode()
    system = page.split('id="system-health"')[1].split("</p>")[0]
    assert "Unhealthy:</strong> 1 of 14 checks fail:" in system and "cluster (no cluster heartbeat yet)" in system
    remedies = page.split('id="system-health-remedies"')[1].split("</ul>")[0]
    assert "start the workers: `manage.py run_workers`" in remedies  # ops.health.REMEDIES
    work = page.split('id="work-waiting"')[1].split("</p>")[0]
    assert "needs attention: 3, the oldest since " in work and "deadlines passed: none" in work, work
    beat(clock.now())
    page = login("support").get(reverse("operations")).content.decode()
    assert "Healthy: all 14 checks pass" in page.split('id="system-health"')[1].split("</p>")[0]
    assert "needs attention: 3, the oldest since " in page.split('id="work-waiting"')[1]


def test_the_overview_and_metrics_read_the_workers_and_the_deadlines_once(login, staff, settings, client) -> None:
    """The overview and `/metrics` show the health report beside their own lines: how full the
    stage workers are and how many cases are past their deadline are read once for both (each was
    read twice, and the overview missed 50 ms at a million cases)."""
    settings.METRICS_TOKEN = "t" * 32
    support = login("support")
    faces = {
        "overview": lambda: support.get(reverse("operations")),
        "/metrics": lambda: client.get("/metrics", HTTP_AUTHORIZATION="Bearer " + "t" * 32),
    }
    for face, get in faces.items():
        with CaptureQueriesContext(connection) as seen:
            assert get().status_code == 200
        sql = [q["sql"] for q in seen.captured_queries]
        broker = [s for s in sql if 'FROM "django_q_ormq"' in s]
        past = [s for s in sql if '"due_at" <=' in s and '"due_at" >' not in s and "COUNT(*)" in s]
        assert len(broker) == 2, (face, broker)  # the stage queue and the control queue, once each
        assert len(past) == 1, (face, past)
