"""Named SQL statements (`wire.sql.Statements`): one `.sql` file per store, each statement after a
`-- name: <name>` line. Kept here under their old name so the back-office's stores, and the test suite's
count of the statements it ran (`USED`, `LOADED`), read the one set the receiver's stores load too."""

from wire.sql import LOADED, USED, Statements

__all__ = ["LOADED", "USED", "Statements"]
