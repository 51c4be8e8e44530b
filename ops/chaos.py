"""The chaos run: real worker processes over real requests, under random faults.

Three roles, one module. The *outer* role (what `manage.py chaos` runs) starts a
scratch embedded PostgreSQL it owns and hands its URL to the *inner* role, the
orchestrator: it seeds approved deletions and disposable retirements, starts K
*worker* processes, and for N seconds SIGKILLs workers (and starts new ones),
pauses some with SIGSTOP past their lease and resumes them, cancels requests,
revokes approvals and restores them, terminates sessions of the target database
(mid-statement or mid-COMMIT) and makes it refuse connections for a moment, has
every third worker look operations up through a lagging source, and with
`--db-restarts` stops PostgreSQL abruptly and starts it again. Then it lets the work settle and checks what the
receiver and the case tables say (`verdict`). Everything printed is observed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection, connections
from django.db.models import Count

from samples.demo import inprocess

LEASE_SECONDS = 3
WAITING = ("needs_review", "needs_attention", "retry_wait", "submitted", "approved", "running")


@dataclass
class Tally:
    kills: int = 0
    pauses: int = 0
    db_restarts: int = 0
    target_kills: int = 0  # a backend of the target database terminated, whatever it was doing (a COMMIT too)
    target_outages: int = 0  # the target database refusing connections for a moment, its sessions ended
    lagging_workers: int = 0  # workers whose lookups read a source that lags behind
    receiver_kills: int = 0  # the receiver process SIGKILLed (whatever it was doing) and started again
    network_cuts: int = 0  # every connection to the receiver dropped, new ones refused, for a moment
    cancels: int = 0
    revokes: int = 0
    faults: list[str] = field(default_factory=list)
    worker_exits: list[str] = field(default_factory=list)  # workers that ended by themselves: their last words


SCRATCH_TABLE = "chaos_scratch"  # made by the outer role in the server it started, before anything else


class NotScratch(Exception):
    """The database is not the scratch server an outer chaos role started: nothing may be written."""


def mark_scratch(database_url: str, token: str) -> None:
    """The outer role marks the scratch database it just started (empty until now) with its token."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {SCRATCH_TABLE} (token text NOT NULL)")
        conn.execute(f"INSERT INTO {SCRATCH_TABLE} (token) VALUES (%s)", [token])


def require_scratch() -> None:
    """Refuse (before any write) unless this process was handed the token its outer role wrote
    into the database it is connected to: any other database, however it is named, is refused."""

    token = os.environ.get("CHAOS_SCRATCH_TOKEN", "")
    if settings.PRODUCTION:
        raise NotScratch("chaos refuses to run with DEPLOYMENT_ENV=production")
    if not token:
        raise NotScratch("chaos roles run only under `manage.py chaos`, against the scratch server it starts")
    with connection.cursor() as cur:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", [SCRATCH_TABLE])
        marked = cur.fetchone()[0]
        if marked:
            cur.execute(f"SELECT count(*) FROM {SCRATCH_TABLE} WHERE token = %s", [token])
            marked = cur.fetchone()[0] == 1
    if not marked:
        name = connection.settings_dict.get("NAME")
        raise NotScratch(f"database {name!r} is not the scratch server this chaos run started; nothing was changed")


LOOKUP_LAG_SECONDS = 4  # a lagging worker's lookup source is this far behind


def worker_env(database_url: str, *, lagging: bool = False, receiver_url: str = "") -> dict[str, str]:
    """A worker reaches the receiver process over the network that chaos cuts; a lagging one mounts
    the receiver in its own process with a lookup source that lags behind (the same database, fences
    and key: one receiver, two transports; the mount takes calls signed for `receiver_url`, the URL
    registered for the receiver)."""
    # The scratch server's own target database, whatever the caller's environment names.
    dropped = ("DEMO_DATABASE_URL", "MIGRATION_DATABASE_URL")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDDED_PG") and k not in dropped}
    env.update(
        RECEIVER_IN_PROCESS="samples.demo.inprocess.application" if lagging else "",
        RECEIVER_PUBLIC_URL=receiver_url,
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=database_url,
        CHAOS_SCRATCH_TOKEN=os.environ.get("CHAOS_SCRATCH_TOKEN", ""),
        DELETION_LEASE_SECONDS=str(LEASE_SECONDS),
        RETIREMENT_DISPOSABLE_WAIT_SECONDS="5",
        RETIREMENT_PURGE_LEASE_SECONDS=str(LEASE_SECONDS),
        RETIREMENT_NOTICE_CLAIM_SECONDS="10",
        EMAIL_BACKEND="django.core.mail.backends.dummy.EmailBackend",
        CONN_MAX_AGE="0",
        PYTHONUNBUFFERED="1",
        RECEIVER_TEST_LOOKUP_LAG_SECONDS=str(LOOKUP_LAG_SECONDS if lagging else 0),
        RECEIVER_STATEMENT_TIMEOUT_MS="5000",
    )
    return env


# The worker role ---------------------------------------------------------------------------


def work_forever(executor: str) -> None:
    """Claim whatever is due, run it, repeat; survive a database that goes away."""
    from core import clock
    from core.errors import DomainError
    from deletions import dispatch, withdrawals, worker
    from deletions.handlers import RunOptions
    from retirements import watcher

    options = RunOptions(stage_delay_ms=random.randint(50, 400))  # stages long enough to be interrupted
    parent = os.getppid()
    while os.getppid() == parent:  # an orphan (its orchestrator died) stops by itself
        try:
            withdrawals.push(now=clock.now())  # what the dispatcher tick does: the target told of withdrawals
            for request_id in dispatch.due_request_ids(clock.now(), limit=20):
                with contextlib.suppress(DomainError):  # refusals are normal here: lease held, not due
                    worker.run(request_id, executor_id=executor, options=options, time_budget=5)
            watcher.run_due(now=clock.now())
        except Exception:  # the database restarting, a lost lease mid-statement: try again
            connections.close_all()
            time.sleep(0.5)
        time.sleep(0.05)


# The inner role: seed, fault, settle, check ------------------------------------------------


def seed(requests: int) -> None:
    from django.contrib.auth.models import Group, Permission, User

    from core import authority, clock
    from deletions import services
    from ops.groups import ensure_groups
    from retirements import services as retirements
    from retirements.models import Lifecycle, Workspace

    ensure_groups(Group, Permission)
    for name, group in (
        ("chaos-operator", "operators"),
        ("chaos-approver", "approvers"),
        ("chaos-approver-2", "approvers"),
    ):
        user, _ = User.objects.get_or_create(username=name, defaults={"is_staff": True})
        user.groups.set(Group.objects.filter(name=group))
    operator = authority.named("chaos-operator")
    approver = authority.named("chaos-approver")
    retirements_wanted = max(1, requests // 5)
    for n in range(requests - retirements_wanted):
        inprocess.enroll(f"demo:chaos-{n}", 2)  # in the demo application, which the receiver serves
        req = services.deletion_submit(actor=operator, target=f"demo:chaos-{n}")
        services.deletion_approve(actor=approver, request_id=req.id, digest=req.inventory_digest)
    for n in range(retirements_wanted):
        slug = f"chaos-ws-{n}"
        Workspace.objects.create(
            slug=slug, name=slug, lifecycle=Lifecycle.DISABLED, is_disposable_test=True, created_at=clock.now()
        )
        retirements.retirement_request(actor=operator, slug=slug, reason="chaos run", confirmation=slug)


class Orchestrator:
    def __init__(self, *, workers: int, database_url: str, datadir: Path, rng: random.Random) -> None:
        self.workers_wanted = workers
        self.database_url = database_url
        self.datadir = datadir
        self.rng = rng
        self.tally = Tally()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.paused: dict[int, float] = {}  # pid -> when to resume
        self.revoked: set[UUID] = set()
        self.started = 0
        self.submitted = 0
        self.logs = datadir.parent / "workers"  # each worker's stderr, read when it ends by itself
        self.logs.mkdir(exist_ok=True)
        self.log_of: dict[int, Path] = {}
        self.ended: set[int] = set()  # workers this run killed, or whose end is already counted
        self.receiver: subprocess.Popen[str] | None = None
        self.receiver_port: int | None = None
        self.proxy: Any = None

    def start_worker(self) -> None:
        self.started += 1
        lagging = self.started % 3 == 0  # every third worker looks operations up through a lagging source
        self.tally.lagging_workers += lagging
        argv = [sys.executable, "manage.py", "chaos", "--role", "worker", "--executor", f"chaos-worker-{self.started}"]
        log = self.logs / f"chaos-worker-{self.started}.log"
        env = worker_env(self.database_url, lagging=lagging, receiver_url=self.proxy.url if self.proxy else "")
        with log.open("wb") as stderr:
            proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        self.procs.append(proc)
        self.log_of[proc.pid] = log

    def live(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.procs if p.poll() is None and p.pid not in self.paused]

    def replace_ended(self) -> None:
        """A worker that ended by itself (its start-up met the database restarting, say) is
        counted with its last words (the last unindented line of its stderr: a traceback's
        exception, not the message's continuation) and replaced, as a supervisor would: a run
        whose workers all died would otherwise pass having done nothing."""
        for proc in list(self.procs):
            if proc.poll() is None or proc.pid in self.ended:
                continue
            self.ended.add(proc.pid)
            said = self.log_of[proc.pid].read_text(errors="replace").splitlines()
            last = [line for line in said if line.strip() and not line[0].isspace()][-1:]  # a traceback's exception
            self.tally.worker_exits.append(f"exit {proc.returncode}: {last[0][:160] if last else '(no output)'}")
            self.start_worker()

    def fault(self, *, db_restarts: bool) -> None:
        choices = [
            "kill",
            "kill",
            "pause",
            "cancel",
            "revoke",
            "restore",
            "submit",
            "submit",
            "target_kill",
            "target_kill",
        ]
        choices += ["target_outage", "receiver_kill", "network_cut"]
        if db_restarts:
            choices.append("db_restart")
        getattr(self, f"do_{self.rng.choice(choices)}")()

    def start_receiver(self) -> None:
        """The demo application's receiver in its own process on the scratch server's demo database,
        behind a network chaos can cut; registered for demo: at the proxy's address (the first time)."""
        from core.store import connection_url
        from ops import netcut

        first = self.proxy is None
        if self.receiver_port is None:
            self.receiver_port = netcut.free_port()
        if self.proxy is None:
            self.proxy = netcut.Proxy(self.receiver_port)
        with (self.logs / "receiver.log").open("ab") as stderr:
            self.receiver = netcut.serve_receiver(
                self.receiver_port,
                connection_url(inprocess.ALIAS),
                stderr=stderr,
                public_url=self.proxy.url,  # the URL it is registered under, which the calls are signed for
                RECEIVER_DATASET=str(inprocess.DATASET),
                RECEIVER_LOG_LEVEL="WARNING",
                RECEIVER_STATEMENT_TIMEOUT_MS="5000",
            )
        if first:
            netcut.register_started(name="demo target system", prefix="demo:", base_url=self.proxy.url)

    def stop_receiver(self) -> None:
        from ops import netcut

        netcut.stop(self.receiver)
        if self.proxy is not None:
            self.proxy.close()

    def do_receiver_kill(self) -> None:
        """SIGKILL the receiver wherever it is (between a commit and its answer, too); start it again."""
        if self.receiver is not None:
            self.receiver.send_signal(signal.SIGKILL)
            self.receiver.wait()
            if self.receiver.stdout is not None:
                self.receiver.stdout.close()
            self.tally.receiver_kills += 1
        self.start_receiver()

    def do_network_cut(self) -> None:
        """Every connection to the receiver dropped and new ones refused, for half a second to two."""
        if self.proxy is not None:
            self.proxy.sever()
            self.tally.network_cuts += 1
            time.sleep(self.rng.uniform(0.5, 2.0))
            self.proxy.restore()

    def do_kill(self) -> None:
        live = self.live()
        if live:
            victim = self.rng.choice(live)
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            self.ended.add(victim.pid)
            self.tally.kills += 1
            self.start_worker()

    def do_pause(self) -> None:
        live = self.live()
        if len(live) > 1:
            victim = self.rng.choice(live)
            victim.send_signal(signal.SIGSTOP)
            self.paused[victim.pid] = time.monotonic() + LEASE_SECONDS + 2  # past its lease
            self.tally.pauses += 1

    def resume_due(self, *, everyone: bool = False) -> None:
        for proc in self.procs:
            due = self.paused.get(proc.pid)
            if due is not None and (everyone or time.monotonic() >= due):
                proc.send_signal(signal.SIGCONT)
                del self.paused[proc.pid]

    def do_submit(self) -> None:
        """New work keeps arriving, so the faults land on work in progress."""
        from deletions import services

        self.submitted += 1
        target = f"demo:chaos-late-{self.submitted}"
        inprocess.enroll(target, 2)
        req = services.deletion_submit(actor=self.actor("chaos-operator"), target=target)
        services.deletion_approve(actor=self.actor("chaos-approver"), request_id=req.id, digest=req.inventory_digest)

    def do_cancel(self) -> None:
        from deletions.models import OPEN_STATUSES, DeletionRequest
        from deletions.services import deletion_cancel

        open_ids = list(
            DeletionRequest.objects.filter(status__in=OPEN_STATUSES, cancel_requested_at__isnull=True).values_list(
                "id", flat=True
            )
        )
        if open_ids and self.rng.random() < 0.5:  # cancel sparingly: most work should finish
            deletion_cancel(actor=self.actor("chaos-operator"), request_id=self.rng.choice(open_ids), reason="chaos")
            self.tally.cancels += 1

    def do_revoke(self) -> None:
        from deletions.models import DeletionRequest
        from deletions.services import deletion_revoke_approval

        running = list(
            DeletionRequest.objects.filter(
                status__in=["approved", "running", "retry_wait"], cancel_requested_at__isnull=True
            )
            .exclude(id__in=self.revoked)
            .values_list("id", flat=True)
        )
        if running:
            request_id = self.rng.choice(running)
            deletion_revoke_approval(actor=self.actor("chaos-approver"), request_id=request_id, reason="chaos")
            self.revoked.add(request_id)
            self.tally.revokes += 1

    def do_restore(self) -> None:
        """A new approval of the same digest for every revoked request that is back in review."""
        from deletions.models import DeletionRequest
        from deletions.services import deletion_approve

        for req in DeletionRequest.objects.filter(id__in=self.revoked, status__in=["submitted", "needs_review"]):
            deletion_approve(actor=self.actor("chaos-approver-2"), request_id=req.id, digest=req.inventory_digest)
            self.revoked.discard(req.id)

    def _target_sessions(self, cur: Any) -> list[int]:
        cur.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [connections["target"].settings_dict["NAME"]],
        )
        return [r[0] for r in cur.fetchall()]

    def do_target_kill(self) -> None:
        """Terminate one session of the target database: a worker's, in whatever it was doing
        (its effect's statements, or its COMMIT)."""
        with connection.cursor() as cur:  # the target database is on this server: reached from the case side
            sessions = self._target_sessions(cur)
            if sessions:
                cur.execute("SELECT pg_terminate_backend(%s)", [self.rng.choice(sessions)])
                self.tally.target_kills += 1

    def do_target_outage(self) -> None:
        """The target database takes no connections for a moment and every session it has ends."""
        name = connections["target"].settings_dict["NAME"]
        with connection.cursor() as cur:
            cur.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            try:
                for pid in self._target_sessions(cur):
                    cur.execute("SELECT pg_terminate_backend(%s)", [pid])
                self.tally.target_outages += 1
                time.sleep(self.rng.uniform(0.5, 2.0))
            finally:
                cur.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        connections["target"].close()

    def do_db_restart(self) -> None:
        """Stop PostgreSQL abruptly (immediate: no checkpoint, crash recovery on start) and start it again."""
        from config import embedded

        connections.close_all()
        wrapper = embedded._wrapper()
        user = "embedded_postgres" if os.geteuid() == 0 else None
        socket_dir = self.database_url.split("host=", 1)[1]
        wrapper.pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=self.datadir, user=user)
        self.tally.db_restarts += 1
        time.sleep(self.rng.uniform(0.5, 2.0))
        embedded.repair(self.datadir)
        start = ["-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(self.datadir / "restart.log"), "start"]
        wrapper.pg_ctl(start, pgdata=self.datadir, user=user)

    @staticmethod
    def actor(username: str) -> Any:
        from core import authority

        return authority.named(username)

    def run(self, *, seconds: float, db_restarts: bool, settle_seconds: float) -> None:
        try:
            self._run(seconds=seconds, db_restarts=db_restarts, settle_seconds=settle_seconds)
        finally:  # whatever happened, no worker outlives the run, nor the receiver
            self.resume_due(everyone=True)
            for proc in self.procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            self.stop_receiver()

    def _run(self, *, seconds: float, db_restarts: bool, settle_seconds: float) -> None:
        for _ in range(self.workers_wanted):
            self.start_worker()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(self.rng.uniform(0.3, 1.5))
            self.resume_due()
            self.replace_ended()
            try:
                self.fault(db_restarts=db_restarts)
            except Exception as exc:  # a fault during a restart: recorded, the run goes on
                self.tally.faults.append(f"{type(exc).__name__}: {str(exc)[:80]}")
                connections.close_all()
        self.resume_due(everyone=True)
        settle_until = time.monotonic() + settle_seconds
        while time.monotonic() < settle_until:
            self.replace_ended()
            try:
                self.do_restore()
                if settled():
                    break
            except Exception:
                connections.close_all()
            time.sleep(1)


def settled() -> bool:
    """Nothing left that a worker would still pick up without a person."""
    from deletions.models import DeletionRequest
    from retirements.models import RetirementRequest

    busy = DeletionRequest.objects.filter(status__in=["approved", "running"]).exists()
    busy = busy or DeletionRequest.objects.filter(status="retry_wait", open_question="").exists()
    return not busy and not RetirementRequest.objects.filter(status__in=["waiting", "executing"]).exists()


def verdict(seconds: float, tally: Tally) -> dict[str, Any]:
    """What the receiver and the case tables say, after the storm."""
    from deletions.models import DeletionRequest, StageHistory
    from retirements.models import RetirementRequest

    completed = cancelled = waiting = lost = 0
    offenders: list[str] = []
    for req in DeletionRequest.objects.all():
        if not reconstructs(req):
            lost += 1
            offenders.append(str(req.id))
            continue
        if req.status == "completed":
            completed += 1
        elif req.status == "cancelled":
            cancelled += 1
        elif req.status in WAITING and req.owner and (req.next_check_at or req.next_attempt_at):
            waiting += 1
        else:
            lost += 1
            offenders.append(str(req.id))
    for ret in RetirementRequest.objects.select_related("workspace"):
        purged = ret.decisions.filter(action="purged").count()
        if purged > 1:
            lost += 1
        elif ret.status == "completed" and ret.workspace.lifecycle == "deleted":
            completed += 1
        elif ret.status in ("cancelled", "closed"):
            cancelled += 1
        elif ret.owner_id is not None and (ret.next_wake_at or ret.status in ("held", "executing")):
            waiting += 1
        else:
            lost += 1
            offenders.append(f"retirement {ret.id}")
    with connections["target"].cursor() as cur:  # what the separate target system applied, read there
        cur.execute("SELECT count(*) FROM receiver.receiver_operations")
        effects = cur.fetchone()[0]
        # The same intended effect (request, action, community) applied more than once.
        cur.execute(
            """SELECT request_id FROM receiver.receiver_operations
               GROUP BY request_id, action, community_id HAVING count(*) > 1"""
        )
        doubled = [str(r[0]) for r in cur.fetchall()]
        duplicates = len(doubled)
        offenders += doubled
        cur.execute("SELECT operation_id, generation, request_id FROM receiver.receiver_operations")
        applied = cur.fetchall()
    generation_of = {op: gen for op, gen, _ in applied}
    # A case that ended believing an applied operation was not applied, or cancelled "before any effect"
    # while the target holds one of its effects: what the case says must be what the target recorded.
    settled = dict(StageHistory.objects.filter(status="completed").values_list("operation_id", "request_id"))
    ended = {
        r.id: r.last_action
        for r in DeletionRequest.objects.filter(status__in=("completed", "cancelled")).only("id", "last_action")
    }
    false_not_applied = false_cancelled = 0
    for op, _, rid in applied:
        if rid in ended and op not in settled:
            false_not_applied += 1
            offenders.append(str(rid))
    for rid in {rid for _, _, rid in applied}:
        if "before any effect" in ended.get(rid, ""):
            false_cancelled += 1
            offenders.append(str(rid))
    stale = 0
    for req in DeletionRequest.objects.only("id"):
        found = stale_writes(req.id, generation_of)
        stale += found
        if found:
            offenders.append(str(req.id))
    requests = DeletionRequest.objects.count() + RetirementRequest.objects.count()
    return {
        "seconds": round(seconds),
        "requests": requests,
        "completed": completed,
        "cancelled": cancelled,
        "waiting_with_owner": waiting,
        "kills": tally.kills,
        "pauses": tally.pauses,
        "db_restarts": tally.db_restarts,
        "target_kills": tally.target_kills,
        "target_outages": tally.target_outages,
        "lagging_workers": tally.lagging_workers,
        "receiver_kills": tally.receiver_kills,
        "network_cuts": tally.network_cuts,
        "worker_exits": len(tally.worker_exits),
        "effects": effects,
        "nothing_applied": effects == 0,  # a storm in which no effect reached the target tested nothing
        "duplicate_effects": duplicates,
        "stale_writes_accepted": stale,
        "false_not_applied": false_not_applied,
        "false_cancelled": false_cancelled,
        "lost": lost,
        "offending_requests": sorted(set(offenders))[:20],
    }


def explain(request_id: str) -> list[str]:
    """What a failing run's offending deletion request holds: its stage chain, the effects at the
    receiver, its lease events and its decisions, as lines read from the scratch database."""
    from deletions.contract import chain_order
    from deletions.models import DeletionDecision, DeletionRequest, LeaseEvent
    from deletions.selectors import load_history

    req = DeletionRequest.objects.filter(id=request_id).first()
    if req is None:
        return [f"request {request_id}: (not a deletion request)"]
    lines = [
        f"request {req.id} {req.target}: {req.status}, owner {req.owner or '-'}, generation {req.lease_generation}"
    ]
    for s in chain_order(load_history(req.id, 10_000)):
        lines.append(
            f"  stage {s.stage} {s.community_id or ''} {s.status}{' current' if s.is_current else ''}"
            f" attempts {s.attempts} operation {s.operation_id}"
        )
    with connections["target"].cursor() as cur:
        cur.execute(
            "SELECT operation_id, action, generation, executor FROM receiver.receiver_operations"
            " WHERE request_id = %s ORDER BY applied_at",
            [req.id],
        )
        lines += [f"  effect {op} {action} generation {gen} by {who}" for op, action, gen, who in cur.fetchall()]
    for e in LeaseEvent.objects.filter(request=req).order_by("at", "id"):
        lines.append(f"  lease {e.event} {e.owner} generation {e.generation} at {e.at.isoformat()}")
    for d in DeletionDecision.objects.filter(request=req).order_by("created_at", "id"):
        lines.append(f"  decision {d.action} by {d.actor_label}: {d.reason}")
    return lines


def reconstructs(req: Any) -> bool:
    """The saved stage chain replays under rules v1 (a finished chain's last row stands in as current)."""
    from deletions.contract import chain_order
    from deletions.errors import WorkflowError
    from deletions.rules import workflow
    from deletions.selectors import load_history

    history = load_history(req.id, 10_000)
    if history and not any(s.is_current for s in history):
        tail = chain_order(history)[-1]
        history = [dataclasses.replace(s, is_current=s.id == tail.id) for s in history]
    try:
        workflow.reconstruct(history, req.inventory_json, req.inventory_version)
    except WorkflowError:
        return False
    return True


def stale_writes(request_id: UUID, generation_of: dict[UUID, int]) -> int:
    """Effects accepted from an older generation after a newer one had applied an earlier stage.

    Along the stage chain (causal order, no clocks) the generations that applied the
    effects never go down; every step down is a stale owner the receiver let through.
    """
    from deletions.contract import chain_order
    from deletions.selectors import load_history

    seen = [
        generation_of[s.operation_id]
        for s in chain_order(load_history(request_id, 10_000))
        if s.operation_id in generation_of
    ]
    return sum(1 for earlier, later in itertools.pairwise(seen) if later < earlier)


def failed(result: dict[str, Any]) -> bool:
    return any(
        result[k]
        for k in (
            "duplicate_effects",
            "stale_writes_accepted",
            "false_not_applied",
            "false_cancelled",
            "lost",
            "nothing_applied",
        )
    )


def summary_line(result: dict[str, Any]) -> str:
    return json.dumps(result)


def statuses() -> dict[str, int]:
    from deletions.models import DeletionRequest

    return dict(DeletionRequest.objects.values_list("status").annotate(n=Count("id")).order_by())


def kept(folder: Path) -> list[str]:
    """What `chaos --keep DIR` says it left, and the exact commands to query and stop it."""
    env = f"env -u DATABASE_URL -u DEMO_DATABASE_URL EMBEDDED_PGDATA={folder / 'pg'}"
    return [
        f"kept in {folder}: the run's database (pg/, stopped cleanly), its output (output.txt), the workers' logs",
        "query it (this starts it): the receiver's effects, then the cases (\\connect postgres);",
        "the SQL that checks the JSON line below: docs/explanation/testing.md, saved as check.sql:",
        f"  {env} .venv/bin/python manage.py dbshell -- -c '\\connect postgres_target postgres' -f check.sql",
        f"stop it: {env} .venv/bin/python manage.py embedded_db stop",
    ]
