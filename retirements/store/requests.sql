-- The writes the staff decisions and the watcher's verdicts share.

-- name: settle_watcher
-- A watcher concludes (settled), or is superseded by another; only an active one.
UPDATE retirements_retirementwatcher
SET status = %(status)s, concluded_at = %(now)s, conclusion = %(reason)s
WHERE id = %(watcher_id)s AND status IN ('pending', 'running')
RETURNING id

-- name: hold
-- Held by a person (who then holds the case) or by the watcher at the point of no return (the
-- staff person on call then holds it: never the requester who lost authority). The new owner is
-- never their own backup: `backup` is the one it has, else the former owner, else the rota's
-- (`store.requests.cover`: one who may hold it; the database refuses a held case without).
UPDATE retirements_retirementrequest
SET status = 'held', held_at = %(now)s, held_by_id = %(held_by)s, hold_reason = %(reason)s, next_wake_at = NULL,
    owner_id = %(owner)s, backup_id = %(backup)s, last_action = %(action)s, updated_at = %(now)s
WHERE id = %(request_id)s AND status = 'waiting'
RETURNING id

-- name: end_without_purge
-- A request ends without purge: cancelled by a person (until the point of no return), or closed
-- by the boundary's verdict. The workspace returns to disabled and the active watchers settle,
-- together (its caller then suppresses the pending notices, with why: `store.notices.replan`).
WITH ended AS (
    UPDATE retirements_retirementrequest
    SET status = %(status)s, next_wake_at = NULL, concluded_at = %(now)s, conclusion = %(conclusion)s,
        last_action = %(conclusion)s, updated_at = %(now)s,
        cancelled_at = CASE WHEN %(cancelled_by)s::integer IS NULL THEN cancelled_at ELSE %(now)s::timestamptz END,
        cancelled_by_id = COALESCE(%(cancelled_by)s::integer, cancelled_by_id),
        cancel_reason = CASE WHEN %(cancelled_by)s::integer IS NULL THEN cancel_reason ELSE %(reason)s END
    WHERE id = %(request_id)s AND status = ANY(%(sources)s)
    RETURNING id, workspace_id
), restored AS (
    UPDATE retirements_workspace w SET lifecycle = 'disabled'
    FROM ended WHERE w.id = ended.workspace_id AND w.lifecycle = 'deletion_pending'
), settled AS (
    UPDATE retirements_retirementwatcher t SET status = 'settled', concluded_at = %(now)s, conclusion = %(settled)s
    FROM ended WHERE t.request_id = ended.id AND t.status IN ('pending', 'running')
)
SELECT id FROM ended

-- name: assign
-- Name an open case's owner and backup (by the rota, or taken, assigned or handed over), fenced
-- by the naming it replaces.
UPDATE retirements_retirementrequest
SET owner_id = %(owner)s, backup_id = %(backup)s, updated_at = %(now)s
WHERE id = %(request_id)s AND status IN ('waiting', 'held', 'executing')
  AND owner_id IS NOT DISTINCT FROM %(was_owner)s AND backup_id IS NOT DISTINCT FROM %(was_backup)s
RETURNING id
