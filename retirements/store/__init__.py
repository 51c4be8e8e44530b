"""The retirement store, the only writer of this app's tables.

Locks in one fixed order (workspace, then request, then watcher / slot / job), applies the values
the services and the pure policy decided, and logs each decision; it imports no policy. The
watcher step's writes (beat, claim the due notices, record what was sent, wait) are named
statements (`steps.sql`), each the only writer of its move, and so is a person's close of an
alarm no move answers (`decisions.sql`). Modules, in import order:
`locks`, `decisions`, `notices`, `requests`, `steps`, `purge`; the shared reads are
`retirements.selectors`.
"""

from __future__ import annotations

from retirements.models import WatcherStatus

ACTIVE_WATCHER = (WatcherStatus.PENDING, WatcherStatus.RUNNING)
