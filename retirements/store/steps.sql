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

-- name: sleep
-- On hold: nothing to do until a release.
UPDATE retirements_retirementrequest SET next_wake_at = NULL
WHERE id = %(request_id)s AND status = 'held'
RETURNING id

-- name: begin_execution
-- Every recheck passed: destructive state commits here, together. The purge job is queued, the
-- request executes, the workspace is deleting, destruction_started is due now, the watcher settles.
WITH executing AS (
    UPDATE retirements_retirementrequest
    SET status = 'executing', next_wake_at = NULL, blocker = '', blocked_until = NULL,
        last_action = %(action)s, updated_at = %(now)s
    WHERE id = %(request_id)s AND status = 'waiting' AND watcher_id = %(watcher_id)s
    RETURNING id, workspace_id
), job AS (
    INSERT INTO retirements_purgejob (request_id, operation_id, status, created_at, lease_generation, refusal)
    SELECT id, %(operation_id)s, 'queued', %(now)s, 0, '' FROM executing
    RETURNING id
), deleting AS (
    UPDATE retirements_workspace w SET lifecycle = 'deleting'
    FROM executing WHERE w.id = executing.workspace_id AND w.lifecycle = 'deletion_pending'
), announced AS (
    INSERT INTO retirements_noticeslot (request_id, kind, due_at, gating, status, attempts, last_error, claimed_by)
    SELECT id, 'destruction_started', %(now)s, false, 'pending', 0, '', '' FROM executing
    ON CONFLICT (request_id, kind, due_at) DO NOTHING
), settled AS (
    UPDATE retirements_retirementwatcher t SET status = 'settled', concluded_at = %(now)s, conclusion = %(settled)s
    FROM executing WHERE t.id = %(watcher_id)s AND t.status IN ('pending', 'running')
)
SELECT id FROM job

-- name: move_eligibility
-- A late gating notice (the final warning) moves eligibility so its promised lead holds.
UPDATE retirements_retirementrequest
SET eligible_at = %(eligible_at)s, last_action = %(action)s, updated_at = %(now)s
WHERE id = %(request_id)s AND status = 'waiting' AND eligible_at < %(eligible_at)s
RETURNING workspace_id
