"""`make bench`: every performance target of issue 13, each against its baseline or limit, in one
run on a throw-away database; one table, then one line of JSON. `--quick` for a smaller run.

Usage: .venv/bin/python bench/run.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["DJANGO_DEBUG"] = "0"  # Django keeps no query log, as in production
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
# The demo application's receiver is mounted in each process (the same signed calls and evidence, no
# socket), the bench's children included (test machinery: samples/demo/inprocess.py).
os.environ.setdefault("RECEIVER_IN_PROCESS", "samples.demo.inprocess.application")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.db import connection, connections  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from bench import console, dbos_peer, drain, history, peer, rawloop, server, shop  # noqa: E402

SECTIONS = ("stage", "shop", "growth", "reconstruct", "drain", "console", "million")


MILLION = 1_000_000


def row(name: str, value: str, target: str, verdict: bool | None) -> list[str]:
    return [name, value, target, "" if verdict is None else ("met" if verdict else "MISSED")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer requests and rounds (under a minute)")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="run only these sections")
    parser.add_argument(
        "--scale", type=int, default=None, help="cases of each workflow in the million section (default 1,000,000)"
    )
    parser.add_argument(
        "--workers", default="1,2", help="worker counts for the drain and its peers, e.g. 1,2,4 (default 1,2)"
    )
    parser.add_argument(
        "--save", type=Path, default=None, help="also write the table and JSON to this file (what bench/plot.py draws)"
    )
    args = parser.parse_args()
    workers = sorted({int(w) for w in args.workers.split(",") if w.strip()})
    only = set(args.only)
    quick = args.quick
    global MILLION
    MILLION = args.scale or (20_000 if quick else 1_000_000)
    setup_test_environment()
    counted = server.preload_statement_stats()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    old_target = connections["target"].creation.create_test_db(verbosity=0, autoclobber=True)  # the demo application's
    result: dict[str, Any] = {}
    table: list[list[str]] = []
    by_section: dict[str, list[list[str]]] = {}
    try:
        from core.store import connection_url
        from samples.demo import inprocess
        from tests.conftest import ensure_demo_receiver, ensure_people

        inprocess.install()  # its tables, and the receiver for its dataset
        ensure_people()
        ensure_demo_receiver()
        result["machine"] = server.settings()
        result["round_trips_counted"] = counted and server.enable()
        url, target_url = connection_url(), connection_url("target")
        run = {
            "stage": lambda: stage_section(quick, result, table, url, target_url),
            "shop": lambda: shop_section(quick, result, table, url, target_url),
            "growth": lambda: growth_section(quick, result, table),
            "reconstruct": lambda: reconstruct_section(quick, result, table),
            "drain": lambda: drain_section(quick, result, table, url, target_url, workers),
            "console": lambda: console_section(quick, result, table),
            "million": lambda: million_section(quick, result, table),
        }
        for section in SECTIONS:
            if section in only:
                first = len(table)
                run[section]()
                by_section[section] = table[first:]
    finally:
        connection.close()
        connection.creation.destroy_test_db(old_name, verbosity=0)
        connections["target"].close()
        connections["target"].creation.destroy_test_db(old_target, verbosity=0)
    result["quick"] = quick  # a quick run measures smaller data: its verdicts are not the targets'
    print_table(table)
    print(json.dumps(result, sort_keys=True))
    if args.save:
        saved = {"at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "argv": sys.argv[1:], "result": result}
        args.save.write_text(json.dumps({**saved, "sections": by_section}, indent=1) + "\n")


def stage_section(quick: bool, result: dict[str, Any], table: list[list[str]], url: str, target_url: str) -> None:
    """One process each, interleaved rounds: the engine (`worker.run`, no queue) and the floor of
    the same work, per stage, with the commits and round trips the server counted."""
    n, rounds = (20, 2) if quick else (60, 3)
    rawloop.side("engine", 1, 5, url, target_url)
    rawloop.side("floor", 1, 5, url, target_url)  # warm both paths
    ran: dict[str, list[dict[str, Any]]] = {"engine": [], "floor": []}
    for _ in range(rounds):
        for name in ran:
            ran[name].append(rawloop.side(name, 1, n, url, target_url))
    med = {name: _medians(runs) for name, runs in ran.items()}
    ratio = statistics.median(
        f["stages_per_s"] / e["stages_per_s"] for f, e in zip(ran["floor"], ran["engine"], strict=True)
    )
    result["stage_ms_engine"] = round(1000 / med["engine"]["stages_per_s"], 3)
    result["stage_ms_floor"] = round(1000 / med["floor"]["stages_per_s"], 3)
    result["stage_ratio"] = round(1 / ratio, 3)
    for name in ran:
        result[f"{name}_commits_per_stage"] = med[name]["commits_per_stage"]
        result[f"{name}_round_trips_per_stage"] = med[name]["round_trips_per_stage"]
    for name, words in (("floor", "floor of the same work, 1 process"), ("engine", "engine (worker.run), 1 process")):
        m = med[name]
        table.append(row(words, f"{1000 / m['stages_per_s']:.2f} ms/stage, {_counts(m)}", "", None))
    table.append(row("stage ratio (floor / engine time)", f"{1 / ratio:.2f}x", ">= 0.5x", 1 / ratio >= 0.5))
    http_rows(quick, result, table, url, target_url, med["engine"])


def http_rows(
    quick: bool, result: dict[str, Any], table: list[list[str]], url: str, target_url: str, mounted: dict[str, Any]
) -> None:
    """The same two sides with the receiver in its own process, over a socket: the engine's stage
    against the floor making the same signed HTTP calls and the same SQL, and the HTTP overhead per
    stage (over a socket against the receiver mounted in process)."""
    n, rounds = (20, 2) if quick else (60, 3)
    with receiver_process(target_url):
        over = {"RECEIVER_IN_PROCESS": ""}
        rawloop.side("engine", 1, 5, url, target_url, **over)
        rawloop.side("floor", 1, 5, url, target_url, **over)
        ran: dict[str, list[dict[str, Any]]] = {"engine": [], "floor": []}
        for _ in range(rounds):
            for name in ran:
                ran[name].append(rawloop.side(name, 1, n, url, target_url, **over))
    med = {name: _medians(runs) for name, runs in ran.items()}
    ratio = statistics.median(
        e["stages_per_s"] / f["stages_per_s"] for f, e in zip(ran["floor"], ran["engine"], strict=True)
    )
    engine_ms, floor_ms = (1000 / med[k]["stages_per_s"] for k in ("engine", "floor"))
    overhead = engine_ms - 1000 / mounted["stages_per_s"]
    result |= {"http_stage_ms_engine": round(engine_ms, 3), "http_stage_ms_floor": round(floor_ms, 3)}
    result |= {"http_stage_ratio": round(ratio, 3), "http_overhead_ms_per_stage": round(overhead, 3)}
    for name, words in (("floor", "floor, receiver over HTTP"), ("engine", "engine, receiver over HTTP")):
        m = med[name]
        table.append(row(words, f"{1000 / m['stages_per_s']:.2f} ms/stage, {_counts(m)}", "", None))
    table.append(row("HTTP stage ratio (floor / engine time)", f"{ratio:.2f}x", ">= 0.6x", ratio >= 0.6))
    table.append(row("HTTP overhead per stage (socket vs mounted)", f"{overhead:.2f} ms", "", None))


def shop_section(quick: bool, result: dict[str, Any], table: list[list[str]], url: str, target_url: str) -> None:
    """The stage on the second sample application (`samples/shop`, the dataset receiver): whole deletions
    through the engine and the receiver's own process over HTTP against the floor of the same SQL, in
    interleaved rounds over the same people, and the completeness walk's own cost per person
    (`bench/shop.py`)."""
    measured = shop.section(quick, url, target_url)
    table.append(
        row(
            f"shop data ({measured['people']:,} people, {measured['organisations']} shops)",
            f"{measured['rows']:,} rows in {measured['tables']} tables, seeded in {measured['seed_s']:.1f} s; "
            f"{measured['n']} people a round a side; both sides changed the same rows in each of "
            f"{measured['same_work']} stages",
            "",
            None,
        )
    )
    shop.report(measured, result, table, row)


@contextmanager
def receiver_process(target_url: str) -> Iterator[None]:
    """The reference receiver in its own process on the bench's target database, registered for demo:."""
    from deletions import targets
    from ops import netcut

    port = netcut.free_port()
    from samples.demo.inprocess import DATASET

    proc = netcut.serve_receiver(port, target_url, RECEIVER_DATASET=str(DATASET), RECEIVER_LOG_LEVEL="WARNING")
    previous = targets.registered()
    try:
        netcut.register_started(name="demo target system", prefix="demo:", base_url=netcut.receiver_url(port))
        yield
    finally:
        netcut.stop(proc)
        for r in previous:
            targets.register(name=r.name, prefix=r.prefix, base_url=r.base_url, keys=r.keys)


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k, v in runs[0].items() if isinstance(v, int | float) and not isinstance(v, bool)]
    return {k: statistics.median(r[k] for r in runs if r.get(k) is not None) for k in keys if runs[0][k] is not None}


def _counts(m: dict[str, Any]) -> str:
    trips = m.get("round_trips_per_stage")
    return f"{m['commits_per_stage']:.2f} commits" + (f", {trips:.2f} round trips" if trips else "") + " per stage"


def growth_section(quick: bool, result: dict[str, Any], table: list[list[str]]) -> None:
    grown = history.growth(rounds=1 if quick else 3, large=200 if quick else 500)
    result["growth_500_vs_50"] = round(grown["ratio"], 3)
    table.append(
        row(
            f"per stage, {grown['large']} vs {grown['small']} communities",
            f"{grown['large_ms']:.2f} ms vs {grown['small_ms']:.2f} ms = {grown['ratio']:.2f}x",
            "<= 1.2x",
            grown["ratio"] <= 1.2,
        )
    )


def reconstruct_section(quick: bool, result: dict[str, Any], table: list[list[str]]) -> None:
    rebuilt = history.reconstruct(quick=quick)
    result["reconstruct_10000_s"] = round(rebuilt["replay_s"], 4)
    table.append(
        row(
            f"replay {rebuilt['stages']:,} stages from scratch",
            f"{rebuilt['replay_s'] * 1000:.0f} ms",
            "< 1 s",
            rebuilt["replay_s"] < 1,
        )
    )
    if "largest_load_replay_s" in rebuilt:
        table.append(
            row(
                f"load + replay the largest request ({rebuilt['largest_stages']:,} stages)",
                f"{rebuilt['largest_load_replay_s'] * 1000:.0f} ms",
                "",
                None,
            )
        )


def spread(values: list[float], digits: int = 2) -> str:
    """min / median / max, as the drain's lines report repeated runs."""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return " / ".join(f"{v:.{digits}f}" for v in (min(values), statistics.median(values), max(values)))


def drain_section(
    quick: bool, result: dict[str, Any], table: list[list[str]], url: str, target_url: str, workers: list[int]
) -> None:
    """At each worker count: the drain (django-q2 and the engine), the engine without the queue,
    the floor of the same work and procrastinate running the floor's work, `rounds` interleaved
    rounds of the same number of requests, every line on the stage rows' clock; each ratio is
    taken within its round and the median reported (min / median / max beside it)."""
    count, rounds = (60, 1) if quick else (300, 3)
    peers = {"procrastinate": peer, "DBOS": dbos_peer}
    sides = ["drain", "engine", "floor", *(name for name, module in peers.items() if module.available())]
    cores = os.cpu_count() or 1
    result["cores"] = cores
    by_workers: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for n in workers:
        ran: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
        for _ in range(rounds):
            each = max(1, count // n)
            ran["drain"].append(drain.drain(each * n, n, url, target_url))
            ran["engine"].append(rawloop.side("engine", n, each, url, target_url))
            ran["floor"].append(rawloop.side("floor", n, each, url, target_url))
            for name, module in peers.items():
                if name in ran:
                    ran[name].append(module.run(n, each * n, url, target_url))
        by_workers[n] = ran
        over = f" (oversubscribed: {cores} cores)" if n > cores else ""
        many = f", min / median / max of {rounds}" if rounds > 1 else ""
        for name in sides:
            rates = [r["stages_per_s"] for r in ran[name]]
            m = _medians(ran[name])
            key = f"{name}_stages_per_s_{n}w"
            result[key] = round(statistics.median(rates), 1)
            result[f"{name}_commits_per_stage_{n}w"] = m["commits_per_stage"]
            result[f"{name}_round_trips_per_stage_{n}w"] = m.get("round_trips_per_stage")
            outside = spread([r["outside_s"] for r in ran[name]], 1)
            table.append(
                row(
                    f"{name}, {n} worker{'s' if n > 1 else ''}{over} ({ran[name][0]['stages']:,} stages{many})",
                    f"{spread(rates, 0)} stages/s; {_counts(m)}; start + stop {outside} s",
                    ">= 184 stages/s" if name == "drain" and n == 2 else "",
                    statistics.median(rates) >= 184 if name == "drain" and n == 2 else None,
                )
            )
        for other, target, floor_ in (("floor", ">= 0.65x", 0.65), ("procrastinate", "", None), ("DBOS", "", None)):
            if other not in ran:
                continue
            ratios = [d["stages_per_s"] / o["stages_per_s"] for d, o in zip(ran["drain"], ran[other], strict=True)]
            med = statistics.median(ratios)
            result[f"drain_vs_{other}_{n}w"] = round(med, 3)
            table.append(
                row(
                    f"drain / {other}, {n} worker{'s' if n > 1 else ''}",
                    f"{spread(ratios)}x",
                    target if n == 2 else "",
                    (med >= floor_) if (floor_ is not None and n == 2) else None,
                )
            )
    if 1 in by_workers:
        for n in workers:
            if n == 1:
                continue
            for name in sides:
                speedup = result[f"{name}_stages_per_s_{n}w"] / result[f"{name}_stages_per_s_1w"]
                result[f"{name}_speedup_{n}w"] = round(speedup, 2)
            words = ", ".join(f"{name} {result[f'{name}_speedup_{n}w']:.2f}x" for name in sides)
            target = ">= 1.6x (drain)" if n == 2 else ""
            table.append(
                row(
                    f"speed-up, {n} workers over 1", words, target,
                    result["drain_speedup_2w"] >= 1.6 if n == 2 else None,
                )
            )  # fmt: skip
    peak = max(r["peak_rss_mb"] for ran in by_workers.values() for r in ran["drain"])
    result["worker_peak_rss_mb"] = round(peak, 1)
    table.append(row("worker peak RSS", f"{peak:.0f} MB", "flat (52-53 MB before)", None))


def console_section(quick: bool, result: dict[str, Any], table: list[list[str]]) -> None:
    scale = 10_000 if quick else 100_000
    built = console.build(scale)
    table.append(row(f"console data ({scale:,} of each)", _built(built), "", None))
    result["admin_max_ms_100k"] = round(_pages(console.pages(built), table), 1)
    ticked = console.watcher(500 if quick else 5000)
    result["watcher_idle_tick_ms"] = round(ticked["idle_ms"], 2)
    result["watcher_5000_due_s"] = round(ticked["seconds"], 2)
    _watcher_rows(ticked, table, "")


def million_section(quick: bool, result: dict[str, Any], table: list[list[str]]) -> None:
    """The console, /metrics and the watcher at a million cases of each workflow (on top of the
    console section's, when it ran): every sort and filter each case list offers."""
    started = time.perf_counter()
    built = console.build(MILLION)
    built["n"] = max(built["n"], MILLION)
    took = time.perf_counter() - started
    table.append(row(f"console data (+{MILLION:,} of each, built in {took:.0f} s)", _built(built), "", None))
    measured = console.pages(built, every=True)
    result["admin_max_ms_1m"] = round(_pages(measured, table, exclude=("/metrics",)), 1)
    result["metrics_ms_1m"] = round(dict(measured)["/metrics"]["ms"], 1)
    ticked = console.watcher(500 if quick else 5000)
    result["watcher_idle_tick_ms_1m"] = round(ticked["idle_ms"], 2)
    result["watcher_5000_due_s_1m"] = round(ticked["seconds"], 2)
    _watcher_rows(ticked, table, " (1M)")


def _built(built: dict[str, Any]) -> str:
    return f"{built['stage_rows']:,} stage rows, {built['attempts']:,} attempts, {built['slots']:,} notice slots"


def _pages(measured: list[tuple[str, dict[str, Any]]], table: list[list[str]], exclude: tuple[str, ...] = ()) -> float:
    """A row per page (median, min-max of 3, queries, sequential scans); the slowest median."""
    slowest = 0.0
    for name, seen in measured:
        if "error" in seen:
            table.append(row(name, seen["error"], "< 50 ms, no seq scan", False))
            slowest = float("inf")
            continue
        if name not in exclude:
            slowest = max(slowest, seen["ms"])
        scans = ", ".join(seen["seq_scans"]) or "none"
        table.append(
            row(
                name,
                f"{seen['ms']:.1f} ms ({seen['min_ms']:.1f}-{seen['max_ms']:.1f}), {seen['queries']} queries, "
                f"seq scans: {scans}",
                "< 50 ms, no seq scan",
                seen["ms"] < 50 and not seen["seq_scans"],
            )
        )
    return slowest


def _watcher_rows(ticked: dict[str, Any], table: list[list[str]], where: str) -> None:
    table.append(
        row(
            f"watcher idle tick{where}",
            f"{ticked['idle_ms']:.1f} ms, {ticked['idle_queries']} queries",
            "<= 5 ms",
            ticked["idle_ms"] <= 5,
        )
    )
    table.append(
        row(
            f"watcher: {ticked['due']:,} due steps{where}",
            f"{ticked['seconds']:.2f} s ({ticked['steps']} steps, {ticked['notices']} notices, "
            f"{ticked['ticks']} ticks)",
            "<= 5 s for 5,000",
            ticked["seconds"] * 5000 / ticked["due"] <= 5,
        )
    )


def print_table(table: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [["measure", "value", "target", ""], *table]) for i in range(4)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(["measure", "value", "target", ""], widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in table:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")


if __name__ == "__main__":
    main()
