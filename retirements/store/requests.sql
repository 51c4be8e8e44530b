-- A request's watchers: the one write the staff decisions and the watcher's verdicts share.

-- name: settle_watcher
-- A watcher concludes (settled), or is superseded by another; only an active one.
UPDATE retirements_retirementwatcher
SET status = %(status)s, concluded_at = %(now)s, conclusion = %(reason)s
WHERE id = %(watcher_id)s AND status IN ('pending', 'running')
RETURNING id

-- name: hold
-- Held by a person (who then holds the case) or by the watcher at the point of no return.
UPDATE retirements_retirementrequest
SET status = 'held', held_at = %(now)s, held_by_id = %(held_by)s, hold_reason = %(reason)s, next_wake_at = NULL,
    owner_id = COALESCE(%(held_by)s, owner_id), last_action = %(action)s, updated_at = %(now)s
WHERE id = %(request_id)s AND status = 'waiting'
RETURNING id
