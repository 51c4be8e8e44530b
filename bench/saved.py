"""Saved bench runs (`bench/run.py --save FILE`): which run speaks for each section.

One rule for the plots (`bench/plot.py`) and the docs' tables (`mkdocs_hooks.py`): a section is
shown from the newest run that measured it, newest by when it was saved, not by its file's name.
No third-party import, so the docs build needs none of the bench's packages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Saved = dict[str, tuple[str, dict[str, Any]]]


def newest_by_section(paths: list[Path]) -> Saved:
    """{section: (file name, run)} from the newest run of each section, sections in run order."""
    runs = sorted(((p.name, json.loads(p.read_text())) for p in paths), key=lambda named: named[1]["at"])
    return {section: (name, run) for name, run in runs for section in run["sections"]}
