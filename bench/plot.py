"""Draw what a saved bench run measured (`bench/run.py --save FILE`): the docs' results page.

    .venv/bin/python bench/plot.py bench/results/*.json --out docs/images/bench

Each picture is drawn from the table rows the run printed, nothing else: the console's pages
against their 50 ms line, the drain and its peers by worker count, and a stage's time on each
side. A section the files did not run draws nothing.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.saved import Saved, newest_by_section

PAGE_LINE = 50.0  # ms: the console's target
NUMBER = r"(\d+(?:\.\d+)?)"


def rows(saved: Saved, section: str) -> list[list[str]]:
    """The section's rows from the newest run that measured it (`saved.newest_by_section`)."""
    return saved[section][1]["sections"][section] if section in saved else []


def pages(saved: Saved, section: str, out: Path, title: str) -> Path | None:
    timed = []
    for name, value, target, _ in rows(saved, section):
        found = re.match(NUMBER + " ms", value)
        if target.startswith("< 50 ms") and found:
            timed.append((float(found.group(1)), name))
    if not timed:
        return None
    timed.sort()
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.16 * len(timed)))
    ax.barh([name for _, name in timed], [ms for ms, _ in timed], color="#417690")
    ax.axvline(PAGE_LINE, color="#ba2121", linestyle="--", label="target: 50 ms")
    ax.set_xlabel("median of 3 (ms)")
    ax.set_title(title)
    ax.tick_params(axis="y", labelsize=7)
    ax.margins(y=0.005)
    ax.legend(loc="lower right")
    fig.tight_layout()
    return _save(fig, out / f"pages-{section}.png")


def drain(saved: Saved, out: Path) -> Path | None:
    """Stages a second by worker count, each side a line, min to max as the error bar."""
    sides: dict[str, list[tuple[int, float, float, float]]] = {}
    for name, value, _, _ in rows(saved, "drain"):
        side = re.match(r"(\w[\w ]*?), (\d+) workers? \(", name)
        rates = re.match(" / ".join([NUMBER] * 3) + " stages/s", value) or re.match(NUMBER + " stages/s", value)
        if side and rates:
            got = [float(g) for g in rates.groups()]
            low, mid, high = got if len(got) == 3 else got * 3
            sides.setdefault(side.group(1), []).append((int(side.group(2)), mid, low, high))
    if not sides:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, points in sorted(sides.items()):
        points.sort()
        xs = [p[0] for p in points]
        ax.errorbar(
            xs,
            [p[1] for p in points],
            yerr=[[p[1] - p[2] for p in points], [p[3] - p[1] for p in points]],
            marker="o",
            capsize=3,
            label=label,
        )
    ax.set_xticks(sorted({p[0] for points in sides.values() for p in points}))
    ax.set_xlabel("workers")
    ax.set_ylabel("stages a second (median; bar: min to max)")
    ax.set_title("The drain and its peers, on the same work")
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    return _save(fig, out / "drain.png")


def stage(saved: Saved, out: Path) -> Path | None:
    timed = []
    for name, value, _, _ in rows(saved, "stage"):
        found = re.match(" / ".join([NUMBER] * 3) + " ms/stage", value) or re.match(NUMBER + " ms/stage", value)
        if found:
            got = [float(g) for g in found.groups()]
            timed.append((re.sub(r" \([^()]*\)$", "", name), got[1] if len(got) == 3 else got[0]))  # the median
    if not timed:
        return None
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.45 * len(timed)))
    ax.barh([n for n, _ in timed], [ms for _, ms in timed], color="#417690")
    for i, (_, ms) in enumerate(timed):
        ax.text(ms, i, f" {ms:.2f}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ms a stage (median of rounds)")
    ax.set_title("One stage, one process: engine and guarantee floor")
    ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    return _save(fig, out / "stage.png")


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("saved", nargs="+", type=Path, help="files written by bench/run.py --save")
    parser.add_argument("--out", type=Path, default=Path("docs/images/bench"))
    args = parser.parse_args()
    saved = newest_by_section(args.saved)
    args.out.mkdir(parents=True, exist_ok=True)
    drawn = [
        stage(saved, args.out),
        drain(saved, args.out),
        pages(saved, "console", args.out, "Console pages at 100,000 cases of each workflow"),
        pages(saved, "million", args.out, "Console pages, sorts and filters at 1,000,000 more"),
    ]
    for path in drawn:
        if path is not None:
            print(path)


if __name__ == "__main__":
    main()
