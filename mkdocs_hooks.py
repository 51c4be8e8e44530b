"""mkdocs hooks: reference pages written from the code, so they never drift from it.

`<!-- commands -->` becomes a table of every `manage.py` command of ours with its own help,
`<!-- health-remedies -->` the remedy each red health check names (`ops/health.py`), and
`<!-- receiver-protocol -->` the receiver protocol's calls from the OpenAPI document the receiver
serves (`receiver/protocol.py`), and `<!-- bench-results -->` the tables of the newest saved bench
run (`bench/results/*.json`, written by `bench/run.py --save`). Nothing is copied by hand.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
OURS = ("api", "core", "deletions", "ops", "retirements")


def _commands() -> str:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django
    from django.core.management import get_commands, load_command_class

    django.setup()
    rows = ["| command | app | what it does |", "| --- | --- | --- |"]
    for name, app in sorted(get_commands().items()):
        if app.split(".")[0] in OURS:
            text = " ".join(str(load_command_class(app, name).help).split()).replace("|", "\\|")
            rows.append(f"| `{name}` | {app.split('.')[0]} | {text} |")
    return "\n".join(rows)


def _health_remedies() -> str:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from ops.health import REMEDIES

    rows = ["| check | when red, what fixes it |", "| --- | --- |"]
    rows += [f"| `{name}` | {remedy} |" for name, remedy in REMEDIES.items()]  # (no remedy holds a pipe)
    return "\n".join(rows)


def _protocol() -> str:
    sys.path.insert(0, str(ROOT))
    from receiver import protocol

    document = protocol.openapi()
    rows = ["| call | what it is |", "| --- | --- |"]
    for path, methods in document["paths"].items():
        for method, call in methods.items():
            rows.append(f"| `{method.upper()} {path}` | {call['summary']} |")
    return "\n".join(rows)


def _bench_results() -> str:
    """Each section from the newest saved run that measured it (as `bench/plot.py` draws them)."""
    sys.path.insert(0, str(ROOT))
    from bench.saved import newest_by_section

    newest = newest_by_section(sorted((ROOT / "bench" / "results").glob("*.json")))
    if not newest:
        return "No saved bench run yet: `bench/run.py --save bench/results/DATE.json`."
    out: list[str] = []
    for section, (name, run) in newest.items():
        machine = run["result"].get("machine", {})
        server = ", ".join(f"{k} {v}" for k, v in sorted(machine.get("server", {}).items()))
        out += [
            "",
            f"### {section}",
            "",
            f"From `{name}`, saved at {run['at']} (`bench/run.py {' '.join(run['argv'])}`) on "
            f"{machine.get('cores', '?')} cores, load {machine.get('load_before', '?')} before; {server}.",
            "",
            "| measure | result | target | verdict |",
            "| --- | --- | --- | --- |",
        ]
        out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in run["sections"][section]]
    return "\n".join(out)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if "<!-- commands -->" in markdown:
        markdown = markdown.replace("<!-- commands -->", _commands())
    if "<!-- health-remedies -->" in markdown:
        markdown = markdown.replace("<!-- health-remedies -->", _health_remedies())
    if "<!-- receiver-protocol -->" in markdown:
        markdown = markdown.replace("<!-- receiver-protocol -->", _protocol())
    if "<!-- bench-results -->" in markdown:
        markdown = markdown.replace("<!-- bench-results -->", _bench_results())
    return markdown
