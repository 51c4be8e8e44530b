"""The stage section on the second sample application (`samples/shop`, the dataset receiver): whole
deletions of shop people through the back-office's engine and the receiver as its own process over
HTTP, against the floor of the same work, and the completeness walk's own cost per person.

Two shop databases on the bench's server, seeded alike (the same people with the same rows: the second
is a copy of the first) and each installed with the shop's dataset file:

- **the product** deletes `shop:<handle>` in the first: `worker.run` in its own process, the receiver
  (`python -m receiver serve`, `RECEIVER_DATASET`) in another, reached over HTTP with signed calls and
  signed evidence; at the receiver each effect is one transaction: the call's nonce, the bounds, the
  generated `receiver.apply` and, for the person's own records (the last
  effect), the completeness walk (`complete.run`).
- **the floor** deletes `shopfloor:<handle>`, the same people, in the copy (installed from the same
  file with that prefix, so the rows, the plans and the SQL are the same): the least the guarantees
  need, on the engine's own tables and the receiver's own SQL, with psycopg directly and no HTTP.
  Per request: the receiver's fence read, the claim and the start. Per stage, three commits and four
  statements at the case database, and one transaction at the receiver:
  1. the intent, durable before the send: mark + submit (`begin_stage`);
  2. the grant read with the same authority checks (`receiver.grant`), then signed;
  3. at the receiver, the grant's signature checked, then one transaction: the call's nonce (the
     replay guard), `complete.run` (the generated `receiver.apply`, and for the last effect the
     person read before it and the walk after it, with its record); the evidence signed as a JWS and
     checked against the receiver's key as the adapter checks it;
  4. the outcome and the next step as one restart point, one commit (`bench.floor.restart_point`:
     `save_result` and `advance` (or `complete`) pipelined in one implicit transaction, as the engine's
     `stages.save_and_advance` sends them).
  The next stage comes from the rules (`workflow.advance`, pure) over the saved result. No heartbeat,
  no lookup, no log line, no bounds (`SET LOCAL` timeouts).

Each side runs `n` people a round in one process, in interleaved rounds; both take the same people
each round. A side's time a stage is its stages over the span of its stage rows (first saved start
to last saved finish, `rawloop.span`), and the ratio floor / product is taken within each round.
Commits and statements are counted by the server at the case database and at the side's shop
database; a receiver's idle connections flush their counts up to 10 s late, so each reading waits
for that (`SETTLE_S`).

The walk (`complete.remains`: `catalog.foreign_keys`, `catalog.reaching`, one counting statement) is timed
inside the floor's last effect of each person, on the copy's data (the same as the product's); its
share is taken of that effect (the receiver's transaction) and of the product's last stage (its row's
start to finish) for the same person.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATASET = ROOT / "samples" / "shop" / "dataset.yaml"
PRODUCT, FLOOR = "product", "floor"
PREFIX = {PRODUCT: "shop:", FLOOR: "shopfloor:"}
SETTLE_S = 11.0  # an idle backend's pending counts are flushed within 10 s (PGSTAT_IDLE_INTERVAL)


# ------------------------------------------------------------------------------------------------
# The parent: databases, receivers, rounds.


@dataclass
class Shop:
    """The two seeded shop databases, their dataset files and the handles in creation order."""

    urls: dict[str, str]
    names: dict[str, str]
    datasets: dict[str, Path]
    handles: list[str]
    people: int
    organisations: int
    seed_s: float
    tables: int
    rows: int


def _url(base: str, name: str) -> str:
    if "?" in base:
        head, query = base.split("?", 1)
        return head.rsplit("/", 1)[0] + f"/{name}?{query}"
    return base.rsplit("/", 1)[0] + f"/{name}"


def _receiver_env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBEDDED_PG", "DJANGO_SETTINGS"))}
    return {**env, "RECEIVER_DATABASE_URL": url, "RECEIVER_LOG_LEVEL": "WARNING"}


@contextmanager
def databases(people: int, organisations: int) -> Iterator[Shop]:
    """The product's shop database seeded (`samples.shop.seed`), the floor's a copy of it, each with the
    receiver installed (the floor's from the same file under its own prefix); dropped after."""
    import psycopg
    from django.db import connection

    from core.store import connection_url
    from samples.shop.seed import seed

    tag = uuid.uuid4().hex[:8]
    names = {PRODUCT: f"bench_shop_{tag}", FLOOR: f"bench_shopfloor_{tag}"}
    base = connection_url()
    urls = {side: _url(base, name) for side, name in names.items()}
    scratch = Path(tempfile.mkdtemp(prefix="bench-shop-"))
    datasets = {PRODUCT: DATASET, FLOOR: scratch / "dataset.yaml"}
    text = DATASET.read_text()
    assert f'prefix: "{PREFIX[PRODUCT]}"' in text
    datasets[FLOOR].write_text(text.replace(f'prefix: "{PREFIX[PRODUCT]}"', f'prefix: "{PREFIX[FLOOR]}"', 1))
    made: list[str] = []
    try:
        with connection.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{names[PRODUCT]}"')
            made.append(names[PRODUCT])
        started = time.perf_counter()
        with psycopg.connect(urls[PRODUCT]) as conn:
            handles = seed(conn, people=people, organisations=organisations, seed=50)
            took = time.perf_counter() - started
            tables, rows = _rows_in(conn)
        with connection.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{names[FLOOR]}" TEMPLATE "{names[PRODUCT]}"')
            made.append(names[FLOOR])
        for side in (PRODUCT, FLOOR):
            ran = subprocess.run(
                [sys.executable, "-m", "receiver", "install", str(datasets[side])],
                cwd=ROOT, env=_receiver_env(urls[side]), capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            if ran.returncode != 0 or "installed" not in ran.stdout:
                raise RuntimeError(f"receiver install on the {side}'s shop database: {ran.stderr or ran.stdout}")
        yield Shop(urls, names, datasets, handles, people, organisations, took, tables, rows)
    finally:
        connection.close()
        with connection.cursor() as cur:
            for name in made:
                cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        shutil.rmtree(scratch, ignore_errors=True)


@contextmanager
def receivers(shop: Shop) -> Iterator[dict[str, subprocess.Popen[str]]]:
    """A receiver process on each shop database, registered for its prefix (the floor's serves only the
    submissions and approvals: its effects go to the database directly); unregistered after, unless
    the evidence the run saved cites its key (then the database keeps it)."""
    from django.db import IntegrityError, transaction

    from deletions.models import TargetSystem
    from ops import netcut

    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        for side in (PRODUCT, FLOOR):
            port = netcut.free_port()
            procs[side] = netcut.serve_receiver(
                port, shop.urls[side], RECEIVER_DATASET=str(shop.datasets[side]), RECEIVER_LOG_LEVEL="WARNING"
            )
            netcut.register_started(name=f"shop, bench {side}", prefix=PREFIX[side], base_url=netcut.receiver_url(port))
        yield procs
    finally:
        for proc in procs.values():
            netcut.stop(proc)
        for prefix in PREFIX.values():
            try:
                with transaction.atomic():
                    TargetSystem.objects.filter(prefix=prefix).delete()
            except IntegrityError:
                pass  # the evidence this run saved cites its key: the registration stays (the database says so)


def counted(names: list[str]) -> dict[str, dict[str, float]]:
    """Commits and statements so far in each database, after every idle connection's counts are in."""
    from bench import server

    time.sleep(SETTLE_S - 1.1)  # (server.counted waits the last 1.1 s itself)
    return server.counted(names)


def cpu_of(pid: int) -> float:
    """A process's CPU time so far (user and system) with its live children's (the receiver's gunicorn
    worker serves its calls), from /proc."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # (ended meanwhile)
            continue
        if stat.parent.name == str(pid) or fields[1] == str(pid):
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def side_round(
    side: str, handles: list[str], shop: Shop, case_db: str, url: str, target_url: str, served: int | None = None
) -> dict[str, Any]:
    """One side over these people in one process (seeded there first, not timed): its stage span, its
    counts per stage at the case database and at its shop database, its stage rows, and the CPU time of
    the receiver process it calls (`served`, its pid), over the run."""
    from bench import rawloop
    from deletions.models import DeletionRequest

    argv = [sys.executable, str(Path(__file__).resolve()), side, shop.urls[side], str(shop.datasets[side])]
    env = rawloop.environment(url, target_url, RECEIVER_IN_PROCESS="", SHOP_HANDLES=",".join(handles))
    names = [case_db, shop.names[side]]
    cpu: float | None = None

    def ready() -> dict[str, dict[str, float]]:
        nonlocal cpu
        read = counted(names)
        cpu = cpu_of(served) if served else None
        return read

    wall, printed, before = rawloop.together(argv, 1, env, ready)
    cpu = None if cpu is None or served is None else cpu_of(served) - cpu
    after = counted(names)
    ids = [uuid.UUID(i) for r in printed for i in r["ids"]]
    stages, seconds = rawloop.span(ids)
    rows = _rows(ids)
    done = DeletionRequest.objects.filter(id__in=ids, status="completed").count()
    if done != len(ids):
        raise RuntimeError(f"shop {side}: {len(ids) - done} of {len(ids)} requests did not complete")
    per = {
        where: {
            "commits": (after[db]["commits"] - before[db]["commits"]) / stages,
            "statements": (after[db]["statements"] - before[db]["statements"]) / stages,
            "exec_ms": (after[db]["exec_ms"] - before[db]["exec_ms"]) / stages,
        }
        for where, db in (("case", case_db), ("receiver", shop.names[side]))
    }
    return {
        "stages": stages,
        "seconds": seconds,
        "ms_per_stage": 1000 * seconds / stages,
        "people": len(ids),
        "outside_s": max(0.0, wall - seconds),
        "cpu_ms_per_stage": 1000 * sum(r["cpu_s"] for r in printed) / stages,
        "per_stage": per,
        "rows": rows,
        "walks": [w for r in printed for w in r.get("walks", [])],
        "receiver_cpu_ms_per_stage": None if cpu is None else 1000 * cpu / stages,
    }


def _rows(ids: list[uuid.UUID]) -> list[dict[str, Any]]:
    """Each completed stage row of these requests: its kind (gate, community, own records), its person and
    its time from start to finish (the grant, the effect and the saved result)."""
    from deletions.models import DeletionRequest, StageHistory
    from receiver.dataset.compile import own_records_id

    own = own_records_id("shop")
    targets = dict(DeletionRequest.objects.filter(id__in=ids).values_list("id", "target"))
    out = []
    for r in StageHistory.objects.filter(request_id__in=ids, status="completed").values(
        "request_id", "stage", "target_community_id", "started_at", "finished_at", "metadata_json"
    ):
        community = str(r["target_community_id"] or "")
        started, finished = r["started_at"], r["finished_at"]
        assert started is not None and finished is not None  # (a completed row has both)
        kind = "gate" if r["stage"] == "gate_user" else "own records" if community == own else "community"
        out.append(
            {
                "kind": kind,
                "handle": str(targets[r["request_id"]]).split(":", 1)[1],
                "ms": (finished - started).total_seconds() * 1000,
                "step": (r["stage"], community),
                "changed": (r["metadata_json"] or {}).get("result", {}).get("tables"),
            }
        )
    return out


def same_work(ran: dict[str, list[dict[str, Any]]]) -> int:
    """The stages both sides ran for the same person, in the same community, changed the same rows of the
    same tables (the evidence's counts per table); how many were compared. Else RuntimeError."""
    seen = {side: {(r["handle"], *r["step"]): r["changed"] for run in ran[side] for r in run["rows"]} for side in ran}
    if seen[PRODUCT].keys() != seen[FLOOR].keys():
        raise RuntimeError("shop: the floor and the product ran different stages for the same people")
    differ = [k for k, changed in seen[PRODUCT].items() if changed != seen[FLOOR][k]]
    if differ:
        raise RuntimeError(f"shop: the floor and the product changed different rows, e.g. {differ[0]}")
    return len(seen[PRODUCT])


def section(quick: bool, url: str, target_url: str) -> dict[str, Any]:
    """Interleaved rounds of both sides over the same people; everything the table prints."""
    from django.db import connection

    people, organisations = (300, 8) if quick else (1000, 25)
    n, rounds, warm = (12, 2, 3) if quick else (40, 5, 4)
    case_db = str(connection.settings_dict["NAME"])
    ran: dict[str, list[dict[str, Any]]] = {PRODUCT: [], FLOOR: []}
    with databases(people, organisations) as shop, receivers(shop) as procs:
        handles = shop.handles
        need = warm + n * rounds
        if len(handles) < need:
            raise RuntimeError(f"the shop has {len(handles)} people; the section deletes {need}")
        served = {PRODUCT: procs[PRODUCT].pid, FLOOR: None}
        for side in (PRODUCT, FLOOR):  # warm both paths (the first person has every shape)
            side_round(side, handles[:warm], shop, case_db, url, target_url, served[side])
        for i in range(rounds):
            chosen = handles[warm + i * n : warm + (i + 1) * n]
            for side in (PRODUCT, FLOOR) if i % 2 == 0 else (FLOOR, PRODUCT):
                ran[side].append(side_round(side, chosen, shop, case_db, url, target_url, served[side]))
        commit_ms = commits(shop.urls[FLOOR])
        queries = catalog_queries(shop.urls[FLOOR])
    sizes = {"people": people, "organisations": organisations, "tables": shop.tables, "rows": shop.rows}
    done = {"ran": ran, "n": n, "rounds": rounds, "commit_ms": commit_ms, "catalog_queries": queries}
    done["same_work"] = same_work(ran)
    return {**done, **sizes, "seed_s": shop.seed_s}


def catalog_queries(url: str, times: int = 20) -> dict[str, float]:
    """The walk's catalog read (`catalog.foreign_keys`) on the floor's shop database after the rounds, `times`
    times, its statement timed from its execute to its fetch (median ms), and the whole read: the rest of it is
    Python building the keys."""
    import psycopg

    from receiver.dataset import catalog

    seen: list[list[float]] = []
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(times):
            with conn.cursor() as cur:
                clocked = _Clocked(cur)
                started = time.perf_counter()
                catalog.foreign_keys(clocked)
                seen.append([*clocked.times, time.perf_counter() - started])
    return {name: 1000 * statistics.median(t[i] for t in seen) for i, name in enumerate((*CATALOG_QUERIES, "whole"))}


def commits(url: str, times: int = 60) -> list[float]:
    """What one commit of one small row costs on this server (its WAL flush), ms each: the unit most of a
    stage's time is counted in."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bench_commit (n int)")
        took = []
        for i in range(times):
            started = time.perf_counter()
            conn.execute("INSERT INTO bench_commit VALUES (%s)", [i])
            took.append(1000 * (time.perf_counter() - started))
        conn.execute("DROP TABLE bench_commit")
    return took


def _rows_in(conn: Any) -> tuple[int, int]:
    """(tables, rows) of a shop database: its tables as the application names them (a partitioned one
    once), every row counted."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace"
            " WHERE s.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
        )
        tables = [t for (t,) in cur.fetchall()]
        rows = 0
        for t in tables:
            cur.execute(f'SELECT count(*) FROM "{t}"')
            rows += int((cur.fetchone() or (0,))[0])
    return len(tables), rows


# ------------------------------------------------------------------------------------------------
# What the table says.


def spread(values: list[float], digits: int = 2) -> str:
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return " / ".join(f"{v:.{digits}f}" for v in (min(values), statistics.median(values), max(values)))


def report(measured: dict[str, Any], result: dict[str, Any], table: list[list[str]], row: Callable[..., Any]) -> None:
    ran = measured["ran"]
    rounds = measured["rounds"]
    many = f", min / median / max of {rounds} rounds" if rounds > 1 else ""
    for side, words in ((FLOOR, "shop floor (same SQL, psycopg)"), (PRODUCT, "shop product (engine + HTTP receiver)")):
        runs = ran[side]
        ms = [r["ms_per_stage"] for r in runs]
        counts = ("commits", "statements", "exec_ms")
        per = {
            where: {k: statistics.median(r["per_stage"][where][k] for r in runs) for k in counts}
            for where in ("case", "receiver")
        }
        stages = sum(r["stages"] for r in runs)
        people = sum(r["people"] for r in runs)
        result[f"shop_stage_ms_{side}"] = round(statistics.median(ms), 3)
        result[f"shop_{side}_per_stage"] = {w: {k: round(v, 2) for k, v in c.items()} for w, c in per.items()}
        result[f"shop_{side}_cpu_ms_per_stage"] = round(statistics.median(r["cpu_ms_per_stage"] for r in runs), 2)
        served = [r["receiver_cpu_ms_per_stage"] for r in runs if r["receiver_cpu_ms_per_stage"] is not None]
        if served:
            result[f"shop_{side}_receiver_cpu_ms_per_stage"] = round(statistics.median(served), 2)
        table.append(
            row(
                f"{words}, 1 process ({people} people, {stages} stages{many})",
                f"{spread(ms)} ms/stage; case db {per['case']['commits']:.2f} commits, "
                f"{per['case']['statements']:.2f} round trips, {per['case']['exec_ms']:.2f} ms executing; "
                f"receiver db {per['receiver']['commits']:.2f} commits, {per['receiver']['statements']:.2f} round "
                f"trips, {per['receiver']['exec_ms']:.2f} ms executing, per stage; CPU a stage: worker "
                f"{result[f'shop_{side}_cpu_ms_per_stage']:.2f} ms"
                + (f", receiver process {statistics.median(served):.2f} ms" if served else ""),
                "",
                None,
            )
        )
    ratios = [f["ms_per_stage"] / p["ms_per_stage"] for f, p in zip(ran[FLOOR], ran[PRODUCT], strict=True)]
    ratio = statistics.median(ratios)
    result["shop_stage_ratio"] = round(ratio, 3)
    result["shop_stage_ratios"] = [round(r, 3) for r in ratios]
    table.append(row("shop stage ratio (floor / product time)", f"{spread(ratios)}x", ">= 0.6x", ratio >= 0.6))
    kinds = ("gate", "community", "own records")
    by_kind = {
        side: {k: [r["ms"] for run in ran[side] for r in run["rows"] if r["kind"] == k] for k in kinds}
        for side in (FLOOR, PRODUCT)
    }
    result["shop_stage_row_ms"] = {
        side: {k: round(statistics.median(v), 2) for k, v in by_kind[side].items() if v} for side in by_kind
    }
    table.append(
        row(
            "shop stage row, start to saved result (median ms, floor vs product)",
            "; ".join(
                f"{k} {statistics.median(by_kind[FLOOR][k]):.2f} vs {statistics.median(by_kind[PRODUCT][k]):.2f}"
                f" ({len(by_kind[PRODUCT][k])})"
                for k in kinds
                if by_kind[FLOOR][k] and by_kind[PRODUCT][k]
            ),
            "",
            None,
        )
    )
    commit_ms = measured["commit_ms"]
    result["shop_commit_ms"] = round(statistics.median(commit_ms), 3)
    table.append(
        row(
            f"one commit of one row on this server ({len(commit_ms)}, min / median / max)",
            f"{spread(commit_ms)} ms",
            "",
            None,
        )
    )
    walks = [w for run in ran[FLOOR] for w in run["walks"]]
    if not walks:
        return
    walk = [w["walk_ms"] for w in walks]
    parts = {k: statistics.median(w[k] for w in walks) for k in ("catalog_ms", "paths_ms", "counts_ms")}
    effect_share = [w["walk_ms"] / w["effect_ms"] for w in walks]
    last_product = {r["handle"]: r["ms"] for run in ran[PRODUCT] for r in run["rows"] if r["kind"] == "own records"}
    product_share = [w["walk_ms"] / last_product[w["handle"]] for w in walks if w["handle"] in last_product]
    result["shop_walk_ms_per_person"] = round(statistics.median(walk), 3)
    result["shop_walk_ms_spread"] = [round(min(walk), 3), round(max(walk), 3)]
    result["shop_walk_parts_ms"] = {k: round(v, 3) for k, v in parts.items()}
    result["shop_walk_paths"] = walks[0]["paths"]
    result["shop_walk_share_of_last_effect"] = round(statistics.median(effect_share), 3)
    result["shop_walk_share_of_product_last_stage"] = round(statistics.median(product_share), 3)
    table.append(
        row(
            f"completeness walk per person ({len(walks)} people, min / median / max)",
            f"{spread(walk)} ms: catalog read {parts['catalog_ms']:.2f}, paths {parts['paths_ms']:.2f}, "
            f"counts {parts['counts_ms']:.2f} ({walks[0]['paths']} foreign-key paths, one statement)",
            "",
            None,
        )
    )
    queries = measured["catalog_queries"]
    result["shop_walk_catalog_queries_ms"] = {k: round(v, 3) for k, v in queries.items()}
    statements = sum(v for k, v in queries.items() if k != "whole")
    table.append(
        row(
            "the walk's catalog read alone (catalog.foreign_keys), after the rounds (median ms of 20)",
            f"{queries['whole']:.2f} ms: "
            + ", ".join(f"{k} {queries[k]:.2f}" for k in CATALOG_QUERIES)
            + f" (statements {statements:.2f}, Python {queries['whole'] - statements:.2f})",
            "",
            None,
        )
    )
    table.append(
        row(
            "walk's share of the last effect (min / median / max)",
            f"{spread([100 * s for s in effect_share], 0)} % of the receiver's transaction "
            f"(median {statistics.median(w['effect_ms'] for w in walks):.2f} ms); "
            f"{spread([100 * s for s in product_share], 0)} % of the product's last stage "
            f"(median {statistics.median(last_product.values()):.2f} ms)",
            "",
            None,
        )
    )


# ------------------------------------------------------------------------------------------------
# The child: one side over the people it is given.


@dataclass
class Timed:
    """Time spent in some functions of a module, patched in this process only (the floor's walk)."""

    spent: dict[str, float] = field(default_factory=dict)

    def wrap(self, module: Any, name: str, key: str) -> None:
        original = getattr(module, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.spent[key] = self.spent.get(key, 0.0) + time.perf_counter() - started

        setattr(module, name, timed)


class Floor:
    """The floor's receiver half (its shop database through psycopg, the compiled dataset, a key) and the
    case database's statements around it."""

    def __init__(self, shop_url: str, dataset: str) -> None:
        import psycopg
        from joserfc.jwk import OKPKey

        from receiver.dataset import catalog, compile, complete

        self.shop = psycopg.connect(shop_url, autocommit=True)
        with self.shop.cursor() as cur:
            self.compiled = compile.check(compile.load(dataset), catalog.read(cur))
        self.key = OKPKey.generate_key("Ed25519", private=True)
        self.kid = "floor-1"
        self.registered = {self.kid: str(self.key.as_dict()["x"])}
        self.timed = Timed()
        self.timed.wrap(complete, "remains", "walk")
        self.timed.wrap(catalog, "foreign_keys", "catalog")
        self.timed.wrap(catalog, "reaching", "paths")
        self.walks: list[dict[str, Any]] = []

    def fence(self, request_id: uuid.UUID) -> int:
        with self.shop.cursor() as cur:
            cur.execute("SELECT generation FROM receiver.receiver_fences WHERE request_id = %s", [request_id])
            found = cur.fetchone()
        return int(found[0]) if found else 0

    def effect(self, token: str) -> dict[str, Any]:
        """What the receiver does with a grant, at the least: its signature and not-after checked, one
        transaction (the nonce, the generated apply and, last, the walk with its record), evidence signed."""
        from django.utils import timezone
        from django.utils.dateparse import parse_datetime
        from joserfc import jws

        from core import grants
        from deletions.targets.http import verify_evidence
        from receiver import effects
        from receiver.dataset import complete
        from receiver.protocol import EVIDENCE_ALGORITHM, SIGNATURE_MAX_AGE_SECONDS
        from receiver.signing import TAKE_NONCE

        now = timezone.now()
        g = grants.verify(token, grants.receiver_key())
        not_after = parse_datetime(str(g.get("not_after", "")))
        if not_after is None or not_after <= now:
            raise RuntimeError(f"floor: grant expired at {g.get('not_after')}")
        params = {**effects._fields(g), "grant": token, "now": now, "applied_at": now.isoformat()}
        self.timed.spent.clear()
        started = time.perf_counter()
        with self.shop.transaction(), self.shop.cursor() as cur:
            # the receiver's replay guard (`receiver/signing.take_nonce`), in the effect's own transaction here
            cur.execute(
                TAKE_NONCE.format(table="receiver.receiver_call_nonces"),
                [secrets.token_urlsafe(24), SIGNATURE_MAX_AGE_SECONDS],
            )
            if cur.fetchone() is None:
                raise RuntimeError("floor: a nonce was seen before")
            recorded, said, _, _ = complete.run(cur, self.compiled, params)
        took = time.perf_counter() - started
        if recorded:
            raise RuntimeError(f"floor: operation {params['operation_id']} was applied before")
        if "walk" in self.timed.spent:
            spent = self.timed.spent
            self.walks.append(
                {
                    "handle": str(params["handle"]).split(":", 1)[1],
                    "walk_ms": 1000 * spent["walk"],
                    "catalog_ms": 1000 * spent["catalog"],
                    "paths_ms": 1000 * spent["paths"],
                    "counts_ms": 1000 * (spent["walk"] - spent["catalog"] - spent["paths"]),
                    "effect_ms": 1000 * took,
                    "paths": int(said.get("catalog_walk", {}).get("foreign_key_paths", 0)),
                }
            )
        body = json.dumps(said, sort_keys=True, separators=(",", ":")).encode()
        signed = jws.serialize_compact(
            {"alg": EVIDENCE_ALGORITHM, "kid": self.kid}, body, self.key, algorithms=[EVIDENCE_ALGORITHM]
        )
        return verify_evidence(signed, self.registered)

    def run(self, request_id: uuid.UUID, owner: str) -> int:
        """One approved request to completion; the stages it ran."""
        from django.db import connection

        from bench.floor import _claimed, _one, restart_point
        from core import clock
        from deletions import receiver
        from deletions.contract import Lease
        from deletions.models import RUNNABLE_STATUSES
        from deletions.rules import workflow
        from deletions.store import leases, stages
        from deletions.store.requests import inventory_digest

        now = clock.now()
        expires = now + timedelta(seconds=60)
        past = self.fence(request_id)
        with connection.cursor() as cur:
            generation, _, _, _, inventory, _, _ = _claimed(
                cur, leases.claim_sql(), request_id=request_id, owner=owner, past=past, expires=expires, now=now,
                runnable=[str(s) for s in RUNNABLE_STATUSES],
            )  # fmt: skip
            inv = json.loads(inventory) if isinstance(inventory, str) else inventory
            lease = Lease(request_id, owner, generation, expires)
            fenced = {"request_id": request_id, "owner": owner, "generation": generation}
            plan = workflow.Plan.of(inv, inventory_digest(inv))
            first = workflow.initial_stage(plan.target)
            started = _one(stages.SQL, cur, "start_request", **fenced, **stages._new_row(lease, first, None), now=now,
                           action="started")  # fmt: skip
        stage_id, ran = started[0], 0
        while True:
            ran += 1
            with connection.cursor() as cur:
                begun = _one(stages.SQL, cur, "begin_stage", **fenced, stage_id=stage_id, now=clock.now(), submit=True,
                             action="running")  # fmt: skip
            row = stages.snapshot(begun)
            granted = receiver.grant(lease, row, plan, now=clock.now())
            evidence = self.effect(granted.token)
            chosen, successor = workflow.advance(row.stage, row.community_id, evidence, plan)
            decision = json.dumps(chosen)
            saved = {**fenced, "stage_id": row.id, "now": clock.now()}
            if successor is None:
                moved = restart_point(saved, evidence, "complete", PREFIX[FLOOR], decision=decision, action="completed")
            else:
                nxt = stages._new_row(lease, successor, row.id)
                moved = restart_point(
                    saved, evidence, "advance", PREFIX[FLOOR], **nxt, decision=decision, action="advanced"
                )
            if successor is None:
                return ran
            stage_id = moved[0]


CATALOG_QUERIES = ("foreign keys",)  # the walk's catalog read: one statement


class _Clocked:
    """A cursor that times each statement from its execute to its fetch."""

    def __init__(self, cur: Any) -> None:
        self.cur = cur
        self.times: list[float] = []
        self.started = 0.0

    def execute(self, sql: str, params: Any = None) -> None:
        self.started = time.perf_counter()
        self.cur.execute(sql, params)

    def fetchall(self) -> list[Any]:
        rows = self.cur.fetchall()
        self.times.append(time.perf_counter() - self.started)
        return list(rows)


def _child(side: str, shop_url: str, dataset: str) -> None:
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from bench import rawloop, server
    from bench.floor import approved
    from deletions import worker
    from deletions.models import DeletionRequest

    handles = [h for h in os.environ["SHOP_HANDLES"].split(",") if h]
    ids = approved([f"{PREFIX[side]}{h}" for h in handles])  # no run enqueued: nothing consumes another's
    floor = Floor(shop_url, dataset) if side == FLOOR else None
    # Each run named with its target, as a queued task names it (the command path reads it first).
    named = dict(DeletionRequest.objects.filter(id__in=ids).values_list("id", "target"))
    owner = f"shop-{side}:{os.getpid()}"
    server.flush()  # the seeding's commits are counted before the start, not as the run's
    print("ready", flush=True)
    sys.stdin.readline()
    before = rawloop.cpu_seconds()
    for rid in ids:
        if floor is not None:
            floor.run(rid, owner)
        else:
            worker.run(rid, executor_id=owner, target=named[rid])
    cpu = rawloop.cpu_seconds() - before
    walks = floor.walks if floor is not None else []
    print(json.dumps({"ids": [str(i) for i in ids], "cpu_s": cpu, "walks": walks}), flush=True)


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2], sys.argv[3])
