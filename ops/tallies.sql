-- The tallies behind /metrics (ops.metrics): the triggers of migration ops/0014 append one event
-- row per change; these fold them and read them back.

-- name: fold
-- Move every event into its tally: one statement, so an event is counted once whoever folds at
-- the same moment (a second fold waits on the rows the first deletes, then finds them gone), in a
-- fixed order of tallies, so two folds never deadlock.
WITH moved AS (
    DELETE FROM ops_tally_events RETURNING metric, label, n, total
), summed AS (
    SELECT metric, label, sum(n) AS n, sum(total) AS total FROM moved GROUP BY metric, label ORDER BY metric, label
)
INSERT INTO ops_tallies (metric, label, n, total)
SELECT metric, label, n, total FROM summed
ON CONFLICT (metric, label) DO UPDATE SET n = ops_tallies.n + EXCLUDED.n, total = ops_tallies.total + EXCLUDED.total

-- name: read
SELECT metric, label, n, total FROM ops_tallies

-- name: duration_buckets
SELECT b::text FROM unnest(ops_duration_buckets()) b ORDER BY b

-- name: recount
-- Every tally counted again from the tables (ops_tally_recount(), migration ops/0014): after a
-- bulk load written with the triggers off.
SELECT ops_tally_recount()
