"""The systems that receive deletion effects, one adapter each (`base.Adapter`).

`for_target(target)` picks the adapter by the target's prefix: `demo:` is the demo target
system, a separate database with real rows (`demo.py`); `manual:` is a system a person deletes in
by hand, review-only (`manual.py`). A new target system is one more module
here implementing `base.Adapter`, named in `ADAPTERS`.
"""

from __future__ import annotations

from core.errors import shown
from deletions.errors import BadInput
from deletions.targets import demo, manual
from deletions.targets.base import Adapter

ADAPTERS: dict[str, Adapter] = {demo.PREFIX: demo.DemoTarget(), manual.PREFIX: manual.ManualTarget()}


def for_target(target: str) -> Adapter:
    for prefix, adapter in ADAPTERS.items():
        if target.startswith(prefix):
            return adapter
    raise BadInput(f"no target system takes {shown(target)} (known: {', '.join(ADAPTERS)})")
