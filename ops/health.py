"""Operations signals: one report for `manage.py health`, `/healthz` (`ops.probes`), `/metrics` and
the overview.

Two parts, never mixed. `checks` is the system's own health: any one failing makes the status red
(the database, the clusters, stage workers, watchers, notices, receivers refusing, not
acknowledging or not answering, integrity faults, saved evidence that is not what its receipt says,
cases with nobody named). `work` is what people have waiting: cases
needing a person, deadlines passed, retirements held or waiting too long; counted with the oldest,
never red, because a case built to need a person is the system working. Counts and ages only: no
secrets, no personal data.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Max

from deletions import evidence as deletion_evidence
from deletions import selectors as deletion_selectors
from deletions import targets as deletion_targets
from deletions.models import AuthorityWithdrawal, DeletionAlarm
from deletions.selectors import COUNT_CAP
from deletions.store.alarms import AFTER_WITHDRAWAL, BOUNDARY_REFUSED, INTEGRITY
from ops import saturation
from ops.models import ClusterHeartbeat, Notification
from retirements import selectors as retirement_selectors
from retirements.contract import FAILING_ALARM
from retirements.models import Alarm as RetirementAlarm
from retirements.models import NoticeSlot, NoticeStatus, PurgeJob, PurgeStatus, RequestStatus
from retirements.policy import HOLD_AGE, WATCHER_AGE
from retirements.selectors import count_stalls

# The control cluster beats each minute and its scheduler looks every 30 s: a live cluster's beats
# are at most 90 s apart (tests/workers/test_saturation.py measures it under saturation). Red at
# 110 s: stopped workers turn health red within two minutes of their last beat.
CLUSTER_STALE = timedelta(seconds=110)
# What fixes each check when it is red: the command or the page, named on every face that shows it
# (`health`, the overview, /healthz's report, the docs' table). The one place for it.
REMEDIES: dict[str, str] = {
    "database": "start the database (`manage.py embedded_db start` on the embedded one) or fix DATABASE_URL",
    "cluster": "start the workers: `manage.py run_workers` (or `systemctl start backoffice-workers`)",
    "stage_workers": "give the stage cluster more workers (Q_WORKERS, then restart `run_workers`) or find the "
    "stage that hangs: `manage.py show_deletion ID` of the oldest waiting case",
    "stalled_watchers": "`manage.py resume_retirement ID --by USER --reason TEXT` for each stalled retirement",
    "failing_watchers": "open the retirement's page (its watcher's last error) and fix the cause; the next step "
    "that succeeds clears it",
    "failed_notices": "`manage.py retry_notices ID --by USER --reason TEXT` once the mail server answers",
    "refused_at_target": "open the case: approve it again (`manage.py approve_deletion ID --approved-by USER "
    "--inventory-digest DIGEST`) or, for a constraint fixed at the receiver, "
    "`manage.py resume_deletion ID --by USER --reason TEXT`",
    "evidence": "open the named case and close its integrity alarm with what you found: "
    "`manage.py close_alarm ID --by USER --reason TEXT`",
    "integrity_faults": "open the case and close the alarm with what you found: "
    "`manage.py close_alarm ID --by USER --reason TEXT`",
    "withdrawals_unacknowledged": "make the receiver answer (`health` names it under receivers); the "
    "dispatcher tells it again each tick",
    "purges_refused": "`manage.py retry_purge ID --by USER --reason TEXT` once the authority is back, or "
    "`close_retirement ID --by USER --reason TEXT`",
    "notifications_failed": "fix the mail server (EMAIL_*) or the webhook's URL, then `manage.py send_notifications`",
    "receivers": "start the named receiver (`python -m receiver serve`, `make receiver` for the demo) or register "
    "its new key: `manage.py register_target`; one whose database went back in time (a restore): "
    "`manage.py reapply_restored PREFIX` (the dispatcher runs it each tick) applies every deletion it lost again; "
    "one the back-office waits too little for: raise its read timeout (admin, Target systems) or lower the "
    "receiver's RECEIVER_STATEMENT_TIMEOUT_MS",
    "unnamed_cases": "put a person on the rota (a staff member in the group that may hold the case) or "
    "`manage.py hand_case ID --kind deletion --assign USER --by USER --reason TEXT` (or --kind retirement)",
}
UNNAMED_LATE = timedelta(minutes=3)  # three custody passes (each minute) without a person named
WITHDRAWAL_LATE = timedelta(minutes=2)  # two dispatcher ticks: the target should have acknowledged by then


def beat(now: datetime) -> None:
    """Record that a cluster ran its schedule: what the cluster check reads."""
    ClusterHeartbeat.objects.update_or_create(name=f"{socket.gethostname()}:{os.getpid()}", defaults={"seen_at": now})


def report(now: datetime, full: saturation.Saturation | None = None) -> dict[str, Any]:
    """The checks and the work at `now`; `full` is how full the stage workers are, when the caller
    has read it already (the overview shows it too, so it is read once)."""
    checks: dict[str, dict[str, Any]] = {}
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
        checks["database"] = {"ok": True, "detail": "reachable"}
    except Exception as exc:  # any driver error means unreachable here
        checks["database"] = {"ok": False, "detail": f"unreachable ({type(exc).__name__})"}
        return {"status": "red", "at": now.isoformat(), "checks": checks, "remedies": remedies(checks), "work": {}}

    last = ClusterHeartbeat.objects.aggregate(last=Max("seen_at"))["last"]
    fresh = last is not None and now - last <= CLUSTER_STALE
    checks["cluster"] = {
        "ok": fresh,
        "age_s": int((now - last).total_seconds()) if last else None,
        "detail": f"last heartbeat {int((now - last).total_seconds())} s ago" if last else "no cluster heartbeat yet",
    }
    full = saturation.read(now) if full is None else full
    waited = full.waited(now)
    checks["stage_workers"] = {
        "ok": waited <= saturation.WAIT_LATE.total_seconds(),
        "busy": full.busy,
        "waiting": len(full.waiting),
        "detail": f"the longest wait for a free worker is {int(waited)} s" if full.waiting else "no case waits",
    }
    stalled = count_stalls(now=now)
    checks["stalled_watchers"] = {"ok": stalled == 0, "count": stalled}
    failed = NoticeSlot.objects.filter(
        status=NoticeStatus.FAILED, request__status__in=[RequestStatus.WAITING, RequestStatus.HELD]
    ).count()
    checks["failed_notices"] = {"ok": failed == 0, "count": failed}
    refused = DeletionAlarm.objects.filter(kind=BOUNDARY_REFUSED, resolved_at__isnull=True).count()
    checks["refused_at_target"] = {"ok": refused == 0, "count": refused}
    checks["evidence"] = evidence(now)  # first: an alarm it raises is an integrity fault too
    faults = integrity_faults()
    checks["integrity_faults"] = {"ok": faults == 0, "count": faults}
    failing = failing_watchers()
    checks["failing_watchers"] = {"ok": failing == 0, "count": failing}
    unnamed = deletion_selectors.unnamed(now, UNNAMED_LATE) + retirement_selectors.unnamed(now, UNNAMED_LATE)
    checks["unnamed_cases"] = {"ok": unnamed == 0, "count": unnamed}  # waiting on a rota with no person named
    late = AuthorityWithdrawal.objects.filter(
        acknowledged_at__isnull=True, created_at__lte=now - WITHDRAWAL_LATE
    ).count()  # the partial index withdrawal_unacknowledged holds only these
    checks["withdrawals_unacknowledged"] = {"ok": late == 0, "count": late}
    refused_purges = PurgeJob.objects.filter(
        status=PurgeStatus.REFUSED, request__status=RequestStatus.EXECUTING
    ).count()
    checks["purges_refused"] = {"ok": refused_purges == 0, "count": refused_purges}
    undelivered = Notification.objects.filter(status="failed").count()
    checks["notifications_failed"] = {"ok": undelivered == 0, "count": undelivered}  # every attempt failed
    checks["receivers"] = receivers(now)
    status = "green" if all(c["ok"] for c in checks.values()) else "red"
    return {"status": status, "at": now.isoformat(), "checks": checks, "remedies": remedies(checks), "work": work(now)}


def remedies(checks: dict[str, dict[str, Any]]) -> dict[str, str]:
    """What fixes each red check, by name (none for a green one)."""
    return {name: REMEDIES[name] for name, check in checks.items() if not check["ok"]}


def work(now: datetime) -> dict[str, dict[str, Any]]:
    """What people have waiting, with the oldest: reported, never red. Each read is bounded by
    an index and the counts stop at COUNT_CAP, so it costs the same at any size."""
    aged = RetirementAlarm.objects.filter(kind__in=[WATCHER_AGE, HOLD_AGE], resolved_at__isnull=True)
    return {
        "needs_attention": _waiting(deletion_selectors.needing_a_person(), "updated_at", now),
        "deadlines_passed": _waiting(deletion_selectors.past_deadline(now), "due_at", now),
        "aged_retirements": _waiting(aged.order_by("created_at"), "created_at", now),
    }


def _waiting(oldest_first: Any, since: str, now: datetime) -> dict[str, Any]:
    count = oldest_first[:COUNT_CAP].count()
    oldest = oldest_first.values_list(since, flat=True).first()
    if not count or oldest is None:
        return {"count": 0, "detail": "none"}
    many = f"{count:,} or more" if count == COUNT_CAP else f"{count:,}"
    return {
        "count": count,
        "oldest_s": int((now - oldest).total_seconds()),
        "detail": f"{many}, the oldest since {oldest:%Y-%m-%d %H:%M} UTC",
    }


def receivers(now: datetime) -> dict[str, Any]:
    """Each registered receiver answers discovery, signing under a key registered for it: red naming
    each that does not, since when (noted across processes: `deletion_targets.reachability`). A
    discovery per receiver at most every 30 s per process, with short timeouts: the read stays cheap."""
    reached = deletion_targets.reachability(now)
    silent = [r for r in reached if not r.ok]
    since = min((r.since for r in silent if r.since is not None), default=None)
    return {
        "ok": not silent,
        "count": len(silent),
        "registered": len(reached),
        **({"since": since.isoformat()} if since else {}),
        "detail": "; ".join(r.detail for r in silent)
        if silent
        else f"{len(reached)} registered, each answers with a registered key",
    }


def evidence(now: datetime) -> dict[str, Any]:
    """Saved evidence is what its receipt says: each call checks a bounded batch of completed stages'
    results against their receipts (the newest cases' stages and the next window of a rolling cursor
    through the rest: `deletions.evidence.sweep`), raising the case's integrity alarm for a mismatch.
    Red while such an alarm is open, or this call found one, naming the cases."""
    swept = deletion_evidence.sweep(now)
    count, named = deletion_evidence.open_alarms(deletion_evidence.NAMED)
    found = {request_id: message for request_id, message in named}
    for f in swept.faults:  # (a case whose integrity alarm was open already, for another fault)
        if f.request_id not in found and len(found) < deletion_evidence.NAMED:
            found[f.request_id] = f"{deletion_evidence.alarm_message([f])}"
    count = max(count, len(found))
    if not count:
        return {
            "ok": True,
            "count": 0,
            "checked": swept.checked,
            "detail": f"{swept.checked} saved results checked against their receipts (the newest cases' and the "
            "next of a sweep through all), each as its receipt says",
        }
    more = f"; and {count - len(found)} more" if count > len(found) else ""
    return {
        "ok": False,
        "count": count,
        "checked": swept.checked,
        "detail": "; ".join(f"case {request_id}: {message}" for request_id, message in found.items()) + more,
    }


def integrity_faults() -> int:
    """Open integrity alarms: records that contradict themselves, and effects recorded by hand
    after the approval was withdrawn."""
    return DeletionAlarm.objects.filter(kind__in=[INTEGRITY, AFTER_WITHDRAWAL], resolved_at__isnull=True).count()


def failing_watchers() -> int:
    """Open failing-watcher alarms: alive, but each step fails."""
    return RetirementAlarm.objects.filter(kind=FAILING_ALARM, resolved_at__isnull=True).count()
