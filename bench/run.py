"""`make bench`: every performance target of issue 13, each against its baseline or limit, in one
run on a throw-away database; one table, then one line of JSON. `--quick` for a smaller run.

Usage: .venv/bin/python bench/run.py [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
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
DRAIN_REQUESTS = 90  # a round's requests at each worker count (--drain-requests)


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
    parser.add_argument("--drain-requests", type=int, default=90, help="requests a round a side in the drain section")
    parser.add_argument(
        "--save", type=Path, default=None, help="also write the table and JSON to this file (what bench/plot.py draws)"
    )
    args = parser.parse_args()
    workers = sorted({int(w) for w in args.workers.split(",") if w.strip()})
    only = set(args.only)
    quick = args.quick
    global MILLION, DRAIN_REQUESTS
    MILLION = args.scale or (20_000 if quick else 1_000_000)
    DRAIN_REQUESTS = args.drain_requests
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
        rawloop.install_notify()  # completions NOTIFY: the bench waits on them, never polls in a window
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
                first, started = len(table), time.perf_counter()
                run[section]()
                by_section[section] = table[first:]
                result.setdefault("section_s", {})[section] = round(time.perf_counter() - started, 1)
                print(f"{section}: {result['section_s'][section]:.0f} s", file=sys.stderr, flush=True)
    finally:
        connection.close()
        connection.creation.destroy_test_db(old_name, verbosity=0)
        connections["target"].close()
        connections["target"].creation.destroy_test_db(old_target, verbosity=0)
        connections.close_all()
        server.stop_restarted()
    result["quick"] = quick  # a quick run measures smaller data: its verdicts are not the targets'
    print_table(table)
    print(json.dumps(result, sort_keys=True))
    if args.save:
        saved = {"at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "argv": sys.argv[1:], "result": result}
        args.save.write_text(json.dumps({**saved, "sections": by_section}, indent=1) + "\n")


def spread3(values: list[float], digits: int = 3) -> dict[str, Any]:
    """min / median / max of a ratio's (or a difference's) rounds, and each round's, for the JSON."""
    return {
        "min": round(min(values), digits),
        "median": round(statistics.median(values), digits),
        "max": round(max(values), digits),
        "rounds": [round(v, digits) for v in values],
    }


def _interleaved(sides: list[Any], rounds: int, run: Any) -> dict[Any, list[dict[str, Any]]]:
    """`rounds` rounds of every side, the order turned by one each round, so no side always runs
    first or after the same one."""
    ran: dict[Any, list[dict[str, Any]]] = {side: [] for side in sides}
    for i in range(rounds):
        turn = i % len(sides)
        for side in sides[turn:] + sides[:turn]:
            started = time.perf_counter()
            ran[side].append(run(side))
            took = time.perf_counter() - started
            print(f"round {i + 1}/{rounds} {side}: {ran[side][-1]['stages_per_s']:.0f} stages/s ({took:.0f} s)",
                  file=sys.stderr, flush=True)  # fmt: skip
    return ran


def stage_section(quick: bool, result: dict[str, Any], table: list[list[str]], url: str, target_url: str) -> None:
    """One process a side, interleaved rounds of four sides: the engine (`worker.run`, no queue) and
    the guarantee floor of the same work, each with the receiver mounted in its process and with the
    receiver in its own process over HTTP. Every ratio and difference is taken within its round: the
    stage ratio (floor / engine time) mounted and over HTTP, and the HTTP overhead a stage (over HTTP
    less mounted, the same side in the same round)."""
    n, rounds = (10, 2) if quick else (40, 5)
    sides = [("engine", False), ("floor", False), ("engine", True), ("floor", True)]
    for name, http in sides:  # warm every path
        rawloop.side(name, 1, 3, url, target_url, over_http=http)
    ran = _interleaved(sides, rounds, lambda side: rawloop.side(side[0], 1, n, url, target_url, over_http=side[1]))
    ms = {side: [1000 / r["stages_per_s"] for r in runs] for side, runs in ran.items()}
    result["stage_runs"] = {f"{name}{' http' if http else ''}": runs for (name, http), runs in ran.items()}
    for (name, http), runs in ran.items():
        where = "receiver over HTTP" if http else "receiver mounted"
        words = f"{'guarantee floor' if name == 'floor' else 'engine (worker.run)'}, {where}, 1 process"
        key = f"stage_ms_{name}{'_http' if http else ''}"
        result[key] = spread3(ms[(name, http)])
        table.append(
            row(f"{words} ({runs[0]['stages']:,} stages, {rounds} rounds)", f"{spread(ms[(name, http)])} ms/stage; "
                f"{_counts(_medians(runs))}", "", None)
        )  # fmt: skip
    for http, target in ((False, 0.5), (True, 0.6)):
        ratios = [f / e for f, e in zip(ms[("floor", http)], ms[("engine", http)], strict=True)]
        key = "http_stage_ratio" if http else "stage_ratio"
        result[key] = spread3(ratios)
        words = "over HTTP" if http else "receiver mounted"
        table.append(
            row(f"stage ratio, {words} (floor / engine time, each round)", f"{spread(ratios)}x", f">= {target}x",
                statistics.median(ratios) >= target)
        )  # fmt: skip
    for name in ("engine", "floor"):
        over = [h - m for h, m in zip(ms[(name, True)], ms[(name, False)], strict=True)]
        result[f"http_overhead_ms_per_stage_{name}"] = spread3(over)
        table.append(
            row(f"HTTP overhead a stage, {name} (over HTTP less mounted, each round)", f"{spread(over)} ms", "", None)
        )


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


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds (a dict of figures, e.g. CPU by process, figure by figure)."""
    out: dict[str, Any] = {}
    for k, v in runs[0].items():
        if isinstance(v, dict):
            out[k] = {p: statistics.median(r[k][p] for r in runs if p in r.get(k, {})) for p in v}
        elif isinstance(v, int | float) and not isinstance(v, bool):
            found = [r[k] for r in runs if r.get(k) is not None]
            if found:
                out[k] = statistics.median(found)
    return out


def _counts(m: dict[str, Any]) -> str:
    """Commits and round trips a stage at the case database and at the target's, CPU a stage by process
    and the server's, medians of the rounds."""
    out = []
    for where, words in (("case", "case db"), ("target", "target db")):
        commits, trips = m.get(f"{where}_commits_per_stage"), m.get(f"{where}_round_trips_per_stage")
        if commits is not None:
            out.append(f"{words} {commits:.2f} commits" + (f", {trips:.2f} round trips" if trips is not None else ""))
    text = "; ".join(out) + " a stage"
    cpu = m.get("cpu_ms_per_stage_by_process")
    if cpu:
        text += "; CPU ms a stage: " + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
        if m.get("server_cpu_ms_per_stage") is not None:
            text += f", server {m['server_cpu_ms_per_stage']:.2f}"
        if m.get("cores_busy") is not None:
            text += f" ({m['cores_busy']:.2f} cores busy)"
    return text


def growth_section(quick: bool, result: dict[str, Any], table: list[list[str]]) -> None:
    grown = history.growth(rounds=2 if quick else 5, large=200 if quick else 500)
    result["growth_500_vs_50"] = spread3(grown["ratios"])
    table.append(
        row(
            f"per stage, {grown['large']} vs {grown['small']} communities ({len(grown['ratios'])} rounds)",
            f"{grown['large_ms']:.2f} ms vs {grown['small_ms']:.2f} ms (medians); {spread(grown['ratios'])}x",
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


DRAIN_SIDES = ("drain", "drain mounted", "floor", "procrastinate", "DBOS")  # the engine alone: the stage section
DRAIN_TARGETS = {"floor": 0.85, "procrastinate": 1.1, "DBOS": 2.0}  # drain / side, at 1 and 2 workers


def drain_section(
    quick: bool, result: dict[str, Any], table: list[list[str]], url: str, target_url: str, workers: list[int]
) -> None:
    """Rounds over every worker count and every side, the order turned each round: the drain
    (django-q2 and the engine) through the receiver over HTTP (the headline), the same drain with the
    receiver mounted, the guarantee floor and procrastinate and DBOS running the floor's work, these
    three over HTTP too (each run its own receiver process). Every
    ratio (drain / side, the speed-up from one worker count to the next) is taken within its round;
    min / median / max printed and saved."""
    count, rounds = (24, 2) if quick else (DRAIN_REQUESTS, 5)
    peers = {"procrastinate": peer, "DBOS": dbos_peer}
    sides = [s for s in DRAIN_SIDES if s not in peers or peers[s].available()]
    cores = os.cpu_count() or 1
    result["cores"] = cores

    def run(side: tuple[int, str]) -> dict[str, Any]:
        n, name = side
        each = max(1, count // n)
        if name.startswith("drain"):
            return drain.drain(each * n, n, url, target_url, over_http=name == "drain")
        if name in ("engine", "floor"):
            return rawloop.side(name, n, each, url, target_url, over_http=True)
        return peers[name].run(n, each * n, url, target_url, over_http=True)

    everything = [(n, name) for n in workers for name in sides]
    ran = _interleaved(everything, rounds, run)
    rates = {side: [r["stages_per_s"] for r in runs] for side, runs in ran.items()}
    result["drain_runs"] = {f"{name} {n}w": runs for (n, name), runs in ran.items()}
    for n in workers:
        over = f" (oversubscribed: {cores} cores)" if n > cores else ""
        for name in sides:
            runs = ran[(n, name)]
            m = _medians(runs)
            key = f"{name.replace(' ', '_')}_stages_per_s_{n}w"
            result[key] = spread3(rates[(n, name)], 1)
            where = "" if name in ("drain mounted",) else ", over HTTP"
            queue = ""
            if name.startswith("drain"):
                theirs = max(r["queue_others_before"] for r in runs)
                queue = f"; queue before the window: {runs[0]['queue_before']} tasks, its own, {theirs} other"
            table.append(
                row(
                    f"{name}, {n} worker{'s' if n > 1 else ''}{over} ({runs[0]['stages']:,} stages{where}, "
                    f"{rounds} rounds)",
                    f"{spread(rates[(n, name)], 0)} stages/s; {_counts(m)}; start + stop "
                    f"{spread([r['outside_s'] for r in runs], 1)} s{queue}",
                    "",
                    None,
                )
            )
        for other in sides:
            if other == "drain":
                continue
            ratios = [d / o for d, o in zip(rates[(n, "drain")], rates[(n, other)], strict=True)]
            result[f"drain_vs_{other.replace(' ', '_')}_{n}w"] = spread3(ratios)
            goal = DRAIN_TARGETS.get(other)
            table.append(
                row(
                    f"drain / {other}, {n} worker{'s' if n > 1 else ''} (stages/s, each round)",
                    f"{spread(ratios)}x",
                    f">= {goal}x" if goal else "",
                    statistics.median(ratios) >= goal if goal else None,
                )
            )
        for peer_name in ("procrastinate", "DBOS"):  # what the same work allows: the floor against the peer
            if peer_name not in sides or "floor" not in sides:
                continue
            ceiling = [f / o for f, o in zip(rates[(n, "floor")], rates[(n, peer_name)], strict=True)]
            result[f"floor_vs_{peer_name}_{n}w"] = spread3(ceiling)
            table.append(
                row(
                    f"floor / {peer_name}, {n} worker{'s' if n > 1 else ''} (the same work's own ceiling, each round)",
                    f"{spread(ceiling)}x",
                    "",
                    None,
                )
            )
    for low, high in itertools.pairwise(workers):
        for name in sides:
            ups = [h / lo for h, lo in zip(rates[(high, name)], rates[(low, name)], strict=True)]
            result[f"{name.replace(' ', '_')}_speedup_{high}w_over_{low}w"] = spread3(ups, 2)
        medians = {name: result[f"{name.replace(' ', '_')}_speedup_{high}w_over_{low}w"]["median"] for name in sides}
        drain_ups = result[f"drain_speedup_{high}w_over_{low}w"]
        at = _medians(ran[(high, "drain")])
        table.append(
            row(
                f"speed-up, {high} workers over {low} (each round)",
                f"drain {spread(drain_ups['rounds'])}x; medians: "
                + ", ".join(f"{name} {v:.2f}x" for name, v in medians.items() if name != "drain")
                + (
                    f"; the drain at {high} keeps {at['cores_busy']:.2f} of {cores} cores busy "
                    f"(its processes and the server, CPU over its span)"
                    if at.get("cores_busy") is not None
                    else ""
                ),
                ">= 1.6x (drain)" if (low, high) == (1, 2) else "",
                drain_ups["median"] >= 1.6 if (low, high) == (1, 2) else None,
            )
        )
    peak = max(r["peak_rss_mb"] for (_, name), runs in ran.items() if name.startswith("drain") for r in runs)
    result["worker_peak_rss_mb"] = round(peak, 1)
    table.append(row("worker peak RSS (the drain's workers, at the end of each window)", f"{peak:.0f} MB", "", None))


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
