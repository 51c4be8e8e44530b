-- The watcher step's own writes on the request and its watcher.

-- name: beat
-- The authoritative watchers of a tick's batch beat (each started once) and their stall alarms
-- clear, in one statement; pairs of (watcher, request). Returned: the watchers that beat (one
-- missing is no longer active: nothing written for it).
WITH pairs AS (
    SELECT * FROM unnest(%(watcher_ids)s::uuid[], %(request_ids)s::uuid[]) AS p(watcher_id, request_id)
), beat AS (
    UPDATE retirements_retirementwatcher t
    SET status = 'running', started_at = COALESCE(started_at, %(now)s), heartbeat_at = %(now)s
    FROM pairs WHERE t.id = pairs.watcher_id AND t.status IN ('pending', 'running')
    RETURNING t.id, pairs.request_id
), cleared AS (
    UPDATE retirements_alarm SET resolved_at = %(now)s
    WHERE request_id IN (SELECT request_id FROM beat) AND kind = 'watcher_stalled' AND resolved_at IS NULL
)
SELECT id FROM beat

-- name: wait
-- Waiting requests sleep until the next thing to do, each with its blocker (if its wait has
-- one): one statement for a tick's batch. Returned: the requests that were waiting.
UPDATE retirements_retirementrequest r
SET next_wake_at = w.wake, blocker = w.blocker, blocked_until = w.blocked_until,
    last_action = COALESCE(w.action, r.last_action), updated_at = %(now)s
FROM unnest(%(request_ids)s::uuid[], %(wakes)s::timestamptz[], %(blockers)s::text[], %(blocked_untils)s::timestamptz[],
            %(actions)s::text[]) AS w(request_id, wake, blocker, blocked_until, action)
WHERE r.id = w.request_id AND r.status = 'waiting'
RETURNING r.id

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
    INSERT INTO retirements_noticeslot
        (request_id, kind, due_at, gating, status, attempts, last_error, claimed_by, claim_generation)
    SELECT id, 'destruction_started', %(now)s, false, 'pending', 0, '', '', 0 FROM executing
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
