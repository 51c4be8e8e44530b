-- The watcher step's own writes on the request and its watcher.

-- name: beat
-- The authoritative watcher beats (started once) and any stall alarm clears, in one statement.
-- No row: the watcher is no longer active.
WITH beat AS (
    UPDATE retirements_retirementwatcher
    SET status = 'running', started_at = COALESCE(started_at, %(now)s), heartbeat_at = %(now)s
    WHERE id = %(watcher_id)s AND status IN ('pending', 'running')
    RETURNING id
), cleared AS (
    UPDATE retirements_alarm SET resolved_at = %(now)s
    WHERE request_id = %(request_id)s AND kind = 'watcher_stalled' AND resolved_at IS NULL
      AND EXISTS (SELECT 1 FROM beat)
)
SELECT id FROM beat

-- name: wait
-- A waiting request sleeps until the next thing to do, with its blocker (if the wait has one).
UPDATE retirements_retirementrequest
SET next_wake_at = %(wake)s, blocker = %(blocker)s, blocked_until = %(blocked_until)s,
    last_action = COALESCE(%(action)s, last_action), updated_at = %(now)s
WHERE id = %(request_id)s AND status = 'waiting'
