"""User-deletion rules v1: pure functions of saved snapshots (no store, no admin, no ORM)."""
