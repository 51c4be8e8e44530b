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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ["DJANGO_DEBUG"] = "0"  # Django keeps no query log, as in production
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django

django.setup()

from django.db import connection, connections  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from bench import console, drain, history, peer, rawloop, stages, workerloop  # noqa: E402

SECTIONS = ("stage", "growth", "reconstruct", "drain", "console", "million")


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
    args = parser.parse_args()
    only = set(args.only)
    quick = args.quick
    global MILLION
    MILLION = args.scale or (20_000 if quick else 1_000_000)
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    old_target = connections["target"].creation.create_test_db(verbosity=0, autoclobber=True)  # the target system's
    result: dict[str, Any] = {}
    table: list[list[str]] = []
    try:
        from core.store import connection_url
        from tests.conftest import ensure_people

        ensure_people()
        if "stage" in only:
            stage_section(quick, result, table)
        if "growth" in only:
            growth_section(quick, result, table)
        if "reconstruct" in only:
            reconstruct_section(quick, result, table)
        if "drain" in only:
            drain_section(quick, result, table, connection_url(), connection_url("target"))
        if "console" in only:
            console_section(quick, result, table)
        if "million" in only:
            million_section(quick, result, table)
    finally:
        connection.close()
        connection.creation.destroy_test_db(old_name, verbosity=0)
        connections["target"].close()
        connections["target"].creation.destroy_test_db(old_target, verbosity=0)
    result["quick"] = quick  # a quick run measures smaller data: its verdicts are not the targets'
    print_table(table)
    print(json.dumps(result, sort_keys=True))


def stage_section(quick: bool, result: dict[str, Any], table: list[list[str]]) -> None:
    stages.create_copies()
    stages.raw_round(5)
    stages.worker_round(5)  # warm both paths
    raws, workers = [], []
    for _ in range(2 if quick else 3):  # interleaved, so a busy moment hits both
        workers.append(stages.worker_round(20 if quick else 60))
        raws.append(stages.raw_round(20 if quick else 60))
    raw = [statistics.median(r[i] for r in raws) for i in range(3)]
    work = [statistics.median(w[i] for w in workers) for i in range(3)]
    result["stage_ratio"] = round(raw[0] / work[0], 3)
    result["stmts_per_stage"] = round(work[1], 1)
    result["commits_per_stage"] = round(work[2], 2)
    table.append(
        row(
            "raw stage (5 transactions, 2 databases)",
            f"{raw[0] * 1000:.2f} ms, {raw[1]:.1f} stmts, {raw[2]:.1f} commits",
            "",
            None,
        )
    )
    table.append(row("worker stage", f"{work[0] * 1000:.2f} ms, {work[1]:.1f} stmts, {work[2]:.2f} commits", "", None))
    table.append(row("stage ratio (raw / worker)", f"{raw[0] / work[0]:.2f}x", ">= 0.5x", raw[0] / work[0] >= 0.5))


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


def drain_section(quick: bool, result: dict[str, Any], table: list[list[str]], url: str, target_url: str) -> None:
    """The drain with 1 and 2 workers, the machine's limit (the raw loop) and the worker loop
    without the queue, interleaved in each of `rounds` rounds, each ratio taken within its round;
    then the peer once."""
    count, rounds = (60, 1) if quick else (300, 3)
    ran: dict[str, list[dict[str, Any]]] = {"one": [], "two": [], "raw": [], "loop": []}
    for _ in range(rounds):
        ran["one"].append(drain.drain(count, 1, url, target_url))
        ran["two"].append(drain.drain(count, 2, url, target_url))
        each = max(1, ran["two"][-1]["stages"] // (2 * stages.STAGES_PER_REQUEST))  # as many stages as it ran
        stages.create_copies()
        ran["raw"].append(rawloop.limit(2, each, url, target_url))
        ran["loop"].append(workerloop.run(2, each, url, target_url))  # no queue: the engine's share of the gap

    def per_round(name: str, key: str = "stages_per_s") -> list[float]:
        return [r[key] for r in ran[name]]

    def over(a: str, b: str) -> list[float]:
        return [x / y for x, y in zip(per_round(a), per_round(b), strict=True)]

    two_vs_one, vs_limit, loop_vs_limit = over("two", "one"), over("two", "raw"), over("loop", "raw")
    result["drain_2w_vs_1w"] = round(statistics.median(two_vs_one), 2)
    result["drain_stages_per_s_2w"] = round(statistics.median(per_round("two")), 1)
    result["drain_wall_stages_per_s_2w"] = round(statistics.median(per_round("two", "wall_stages_per_s")), 1)
    result["worker_peak_rss_mb"] = round(max(r["peak_rss_mb"] for r in ran["one"] + ran["two"]), 1)
    result["raw_loop_stages_per_s_2p"] = round(statistics.median(per_round("raw")), 1)
    result["drain_vs_limit_2w"] = round(statistics.median(vs_limit), 3)
    result["drain_vs_limit_2w_rounds"] = [round(v, 3) for v in vs_limit]
    result["worker_loop_stages_per_s_2p"] = round(statistics.median(per_round("loop")), 1)
    result["worker_loop_vs_limit_2p"] = round(statistics.median(loop_vs_limit), 3)
    many = f", min / median / max of {rounds}" if rounds > 1 else ""
    for name, target in (("one", ""), ("two", ">= 184 stages/s")):
        workers = ran[name][0]["workers"]
        table.append(
            row(
                f"drain {count} requests, {workers} worker{'s' if workers > 1 else ''}{many}",
                f"{spread(per_round(name), 0)} stages/s from the first stage's start; "
                f"{spread(per_round(name, 'wall_stages_per_s'), 0)} with the cluster's "
                f"{spread(per_round(name, 'startup_s'), 1)} s start",
                target,
                statistics.median(per_round(name)) >= 184 if target else None,
            )
        )
    table.append(
        row("drain, 2 workers / 1 worker", f"{spread(two_vs_one)}x", ">= 1.6x", result["drain_2w_vs_1w"] >= 1.6)
    )
    table.append(
        row(
            f"machine limit: raw stage loop, 2 processes ({ran['raw'][0]['stages']:,} stages)",
            f"{spread(per_round('raw'), 0)} stages/s; "
            f"client CPU {spread(per_round('raw', 'cpu_ms_per_stage'))} ms/stage",
            "",
            None,
        )
    )
    table.append(
        row("drain, 2 workers / machine limit", f"{spread(vs_limit)}x", ">= 0.65x", result["drain_vs_limit_2w"] >= 0.65)
    )
    table.append(
        row(
            f"worker loop without the queue, 2 processes ({ran['loop'][0]['stages']:,} stages)",
            f"{spread(per_round('loop'), 0)} stages/s = {spread(loop_vs_limit)}x the limit; "
            f"client CPU {spread(per_round('loop', 'cpu_ms_per_stage'))} ms/stage",
            "",
            None,
        )
    )
    if not peer.available():
        table.append(row("peer: procrastinate", "not installed (make bench installs it)", "", None))
        return
    stages.create_copies()
    seen = peer.run(2, each, url, target_url)  # the last round's count
    result["procrastinate_stages_per_s_2p"] = round(seen["stages_per_s"], 1)
    result["procrastinate_ratio"] = round(ran["two"][-1]["stages_per_s"] / seen["stages_per_s"], 3)
    table.append(
        row(
            f"peer: procrastinate, raw stage SQL, 2 workers ({seen['stages']:,} stages)",
            f"{seen['stages_per_s']:.0f} stages/s; "
            f"the last round's drain / peer = {result['procrastinate_ratio']:.2f}x",
            "",
            None,
        )
    )
    table.append(row("worker peak RSS", f"{result['worker_peak_rss_mb']:.0f} MB", "flat (52-53 MB before)", None))


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
